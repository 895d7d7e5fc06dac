package mysql

import (
	"context"
	"net"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// The dial functions registered with RegisterDialContext, by network.
var (
	dialsMu sync.RWMutex
	dials   map[string]mysql.DialContextFunc
)

// RegisterDialContext registers dial for the network net, with
// go-sql-driver/mysql (mysql.RegisterDialContext: the plain driver and
// connections of pooldriver.Wrap use it) and with this dialect, whose
// connections on the networks it dials itself (tcp, tcp4, tcp6, unix)
// then reach the server through dial too, and still watch the socket.
//
// A dial function registered with go-sql-driver alone for one of those
// networks is bypassed by the dialect: the driver offers no way to look it
// up, and the dialect hands the driver a socket of its own (mysql.Config's
// DialFunc, which the driver prefers to its registry). Register it here
// instead, or under a network name of its own ("@tunnel(host:3306)"),
// which the dialect leaves to the driver (without watching the socket).
func RegisterDialContext(net string, dial mysql.DialContextFunc) {
	mysql.RegisterDialContext(net, dial)
	dialsMu.Lock()
	defer dialsMu.Unlock()
	if dials == nil {
		dials = make(map[string]mysql.DialContextFunc)
	}
	dials[net] = dial
}

// DeregisterDialContext removes the dial function registered for net, from
// go-sql-driver/mysql and from this dialect.
func DeregisterDialContext(net string) {
	mysql.DeregisterDialContext(net)
	dialsMu.Lock()
	defer dialsMu.Unlock()
	delete(dials, net)
}

// dial opens the socket of a new connection: through the function
// registered for network with RegisterDialContext, if any (as the driver
// would, given the address alone); else with a plain net.Dialer.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dialsMu.RLock()
	f := dials[network]
	dialsMu.RUnlock()
	if f != nil {
		return f(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

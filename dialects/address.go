package dialects

import (
	"net"
	"strconv"
)

// Address is where a Template's connections go, as far as its DSN says.
type Address struct {
	// Host is a host name or IP address, or for a unix socket its path
	// (PostgreSQL: the socket's directory); "": the DSN names none.
	Host     string
	Port     int    // 0: none (a MySQL unix socket) or not given
	Database string // "": none named (the server's default)
	// Others are the further hosts of a multi-host DSN, in the order the
	// driver tries them, each written as Host and Port are.
	Others []Address
}

// String writes a as the OpenTelemetry conventions name a connection pool
// that has no name of its own: server.address:server.port/db.namespace,
// such as db.example.com:5432/shop, with every host of a multi-host DSN
// (db1:5432,db2:5432/shop: the first may be down, or a standby). An IPv6
// host is in brackets; ":port" is left out without a port, "/database"
// without a database. It is "" when a names no host.
func (a Address) String() string {
	if a.Host == "" {
		return ""
	}
	s := a.hostPort()
	for _, o := range a.Others {
		s += "," + o.hostPort()
	}
	if a.Database != "" {
		s += "/" + a.Database
	}
	return s
}

// hostPort writes a's host and port.
func (a Address) hostPort() string {
	if a.Port > 0 {
		return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
	}
	return a.Host
}

// AddressedTemplate is implemented by a Template that can say where its
// connections go. pooldriver names a pool without a name after it
// (Address.String); the Template of a dialect that does not implement it,
// or whose Address has no Host, names it with its String (the DSN without
// its password).
type AddressedTemplate interface {
	Template
	Address() Address
}

// Address is unknown for a wrapped connector: it hides its configuration.
func (genericTemplate) Address() Address { return Address{} }

var _ AddressedTemplate = genericTemplate{}

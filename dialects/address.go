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
}

// String writes a as the OpenTelemetry conventions name a connection pool
// that has no name of its own: server.address:server.port/db.namespace,
// such as db.example.com:5432/shop. An IPv6 host is in brackets; ":port"
// is left out without a port, "/database" without a database. It is ""
// when a names no host.
func (a Address) String() string {
	if a.Host == "" {
		return ""
	}
	s := a.Host
	if a.Port > 0 {
		s = net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
	}
	if a.Database != "" {
		s += "/" + a.Database
	}
	return s
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

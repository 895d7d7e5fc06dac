package dialects

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
)

// PermanentErrorDetector is implemented by a Template whose database says,
// when it refuses a new connection, that it refuses it for a cause that
// trying again the same way does not cure: the authentication failed, the
// database or the role does not exist, nothing listens on the port, the
// TLS the client asks for and the server's do not agree. pooldriver then
// fails at once the callers that only a new connection could serve,
// instead of letting each wait for attempts that fail the same way;
// transient causes (the server's connection limit, a timeout, a server
// starting up or shutting down) are not permanent. Errors of statements
// are never asked about. err is one attempt's: a connect that tried
// several hosts is asked about each of them (see EveryAttempt).
type PermanentErrorDetector interface {
	PermanentConnectError(err error) bool
}

var permanentFuncs detectors

// RegisterPermanentErrorDetector registers f, which the Template of Wrap
// consults: a wrapped connector's connect error that any registered f
// recognizes counts as permanent. A dialect package calls it from init,
// with the test its own Template uses.
func RegisterPermanentErrorDetector(f func(err error) bool) { permanentFuncs.add(f) }

// PermanentConnectError is the generic Template's PermanentErrorDetector:
// whether err is a refused port or a TLS failure (PermanentNetError), or a
// registered dialect recognizes it.
func (genericTemplate) PermanentConnectError(err error) bool {
	return PermanentNetError(err) || permanentFuncs.any(err)
}

var _ PermanentErrorDetector = genericTemplate{}

// PermanentNetError reports the permanent connect errors that any database
// driver meets below its protocol: the port refused the connection
// (ECONNREFUSED: nothing listens there), the host's name is unknown (the
// resolver's answer that it does not exist, not a timeout or a failed
// lookup), or TLS failed (a certificate not trusted, for another host or
// invalid, or the server's alert). A dialect's PermanentConnectError
// starts with it.
func PermanentNetError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if dns := (*net.DNSError)(nil); errors.As(err, &dns) && dns.IsNotFound {
		return true
	}
	var (
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &authority) ||
		errors.As(err, &host) || errors.As(err, &invalid)
}

// EveryAttempt reports whether permanent holds for each attempt whose
// error err reports. A connect to a DSN of several hosts (or a name of
// several addresses) fails with the error of each: pgx's ConnectError and
// the mysql dialect join them. Trying again cures nothing only where it
// cures nothing on any of them: a port that refuses the connection beside
// a standby that refuses writes is a failover under way, not a permanent
// refusal. An attempt at an address of a family this host cannot reach
// (a name's IPv6 address on a host without IPv6: localhost's ::1 in a
// container, say) says nothing of the server, and is left out; an error
// of nothing else is not permanent. An error that joins no others is its
// one attempt. pooldriver asks a PermanentErrorDetector through it.
func EveryAttempt(err error, permanent func(error) bool) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			judged := false
			for _, a := range j.Unwrap() {
				if unreachableFamily(a) {
					continue
				}
				if !EveryAttempt(a, permanent) {
					return false
				}
				judged = true
			}
			return judged
		}
	}
	return permanent(err)
}

// unreachableFamily reports an attempt that failed before it left this
// host because its address's family is unusable here: no such address to
// send from, no route to that network, the family not supported. A host
// that stopped answering gives EHOSTUNREACH or a timeout, not these.
func unreachableFamily(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EAFNOSUPPORT)
}

// ConnectErrors returns what t's database can tell of a connect's error:
// that the server is at its connection limit (ConnLimitDetector), that
// trying again is useless on every host the connect tried
// (PermanentErrorDetector, EveryAttempt); nil where t cannot tell.
func ConnectErrors(t Template) (atLimit, permanent func(error) bool) {
	if d, ok := t.(ConnLimitDetector); ok {
		atLimit = d.AtConnLimit
	}
	if d, ok := t.(PermanentErrorDetector); ok {
		permanent = func(err error) bool { return EveryAttempt(err, d.PermanentConnectError) }
	}
	return atLimit, permanent
}

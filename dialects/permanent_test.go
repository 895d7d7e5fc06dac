package dialects

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestPermanentNetError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused port", fmt.Errorf("failed to connect: %w", refused), true},
		{"unknown host", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.example", IsNotFound: true}}, true},
		{"lookup timeout", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "db.example", IsTimeout: true}}, false},
		{"lookup failed", &net.DNSError{Err: "server misbehaving", Name: "db.example", IsTemporary: true}, false},
		{"unknown authority", fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), true},
		{"other host", x509.HostnameError{Host: "db"}, true},
		{"timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)}, false},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{"nil", nil, false},
	} {
		if got := PermanentNetError(c.err); got != c.want {
			t.Errorf("%s: PermanentNetError = %v, want %v", c.name, got, c.want)
		}
	}
	errDenied := errors.New("denied")
	RegisterPermanentErrorDetector(func(err error) bool { return errors.Is(err, errDenied) })
	var g genericTemplate
	if !g.PermanentConnectError(fmt.Errorf("x: %w", errDenied)) || !g.PermanentConnectError(refused) || g.PermanentConnectError(errors.New("busy")) {
		t.Error("the generic template does not consult the registered detectors and PermanentNetError")
	}
}

// TestEveryAttempt: a connect that tried several hosts is permanent only
// where every host's error is, however the attempts are wrapped and
// joined (pgx's ConnectError wraps errors.Join; the mysql dialect wraps
// it with fmt.Errorf).
func TestEveryAttempt(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readOnly := errors.New("ValidateConnect failed: read only connection")
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)}
	noV6 := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EADDRNOTAVAIL)}
	noNet := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"one refused", refused, true},
		{"one answered", readOnly, false},
		{"refused, then a standby", fmt.Errorf("failed to connect: %w", errors.Join(refused, readOnly)), false},
		{"a standby, then refused", fmt.Errorf("none of the 2 servers: %w", errors.Join(fmt.Errorf("host b: %w", readOnly), refused)), false},
		{"refused, then silent", errors.Join(refused, timeout), false},
		{"every host refused", fmt.Errorf("failed to connect: %w", errors.Join(refused, fmt.Errorf("host b: %w", refused))), true},
		{"joined once, refused", errors.Join(refused), true},
		{"nested lists", errors.Join(refused, errors.Join(refused, readOnly)), false},
		{"::1 unusable here, 127.0.0.1 refused", errors.Join(noV6, refused), true},
		{"an AAAA on an IPv4-only network, the A refused", errors.Join(refused, noNet), true},
		{"every address unusable here", errors.Join(noV6, noNet), false},
		{"unusable here, then a standby", errors.Join(noV6, readOnly), false},
		{"a host that stopped answering, then refused", errors.Join(noHost, refused), false},
		{"nil", nil, false},
	} {
		if got := EveryAttempt(c.err, PermanentNetError); got != c.want {
			t.Errorf("%s: EveryAttempt = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestConnectErrors: a Template's detectors, permanent only where every
// attempt of a joined connect error is.
func TestConnectErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readOnly := errors.New("ValidateConnect failed: read only connection")
	atLimit, permanent := ConnectErrors(genericTemplate{})
	if atLimit == nil || permanent == nil {
		t.Fatalf("the generic Template: atLimit set %v, permanent set %v; want both", atLimit != nil, permanent != nil)
	}
	if !permanent(refused) || permanent(errors.Join(refused, readOnly)) {
		t.Errorf("permanent(refused) = %v, permanent(refused + a standby) = %v; want true, false",
			permanent(refused), permanent(errors.Join(refused, readOnly)))
	}
	if atLimit, permanent := ConnectErrors(nil); atLimit != nil || permanent != nil {
		t.Errorf("no Template: detectors set (%v, %v); want none", atLimit != nil, permanent != nil)
	}
}

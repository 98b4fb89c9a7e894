package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The tests receive mail on a real SMTP server: the server side of
// github.com/emersion/go-smtp on a free port of 127.0.0.1, with STARTTLS or
// implicit TLS under a self-signed certificate made here, and AUTH PLAIN.

const (
	testSMTPUser     = "tally"
	testSMTPPassword = "smtp-secret-password"
	testMailFrom     = "Tally Reports <reports@tally.example>"
)

// receivedMail is one message the test server accepted.
type receivedMail struct {
	From string
	To   []string
	Data []byte
}

// smtpFault is what the test server does with a DATA command: nil
// accepts, an *smtp.SMTPError answers it, errDropConnection closes the
// connection without an answer.
type smtpFault func(n int) error

var errDropConnection = errors.New("drop the connection")

// testSMTP is a running test SMTP server.
type testSMTP struct {
	addr string
	pool *x509.CertPool
	mode string

	mu       sync.Mutex
	received []receivedMail
	datas    int // DATA commands seen, accepted or not
	fault    smtpFault
}

// newTestSMTP starts a server in mode (SMTPStartTLS, SMTPImplicit or
// SMTPNone), closed at the test's end.
func newTestSMTP(t *testing.T, mode string) *testSMTP {
	t.Helper()
	cert, pool := selfSignedCert(t)
	ts := &testSMTP{pool: pool, mode: mode}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &testSMTPSession{srv: ts, conn: c}, nil
	}))
	srv.Domain = "127.0.0.1"
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	if mode != SMTPNone { // none offers no STARTTLS
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	srv.AllowInsecureAuth = mode == SMTPNone
	var l net.Listener
	var err error
	if mode == SMTPImplicit {
		l, err = tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig)
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ts
}

// config is the MailConfig that reaches this server.
func (ts *testSMTP) config() MailConfig {
	host, port, _ := net.SplitHostPort(ts.addr)
	return MailConfig{Host: host, Port: port, TLS: ts.mode, User: testSMTPUser, Password: testSMTPPassword, From: testMailFrom,
		TLSConfig: &tls.Config{RootCAs: ts.pool}}
}

func (ts *testSMTP) setFault(f smtpFault) {
	ts.mu.Lock()
	ts.fault = f
	ts.mu.Unlock()
}

// mails is what the server accepted so far.
func (ts *testSMTP) mails() []receivedMail {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]receivedMail(nil), ts.received...)
}

func (ts *testSMTP) dataCount() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.datas
}

type testSMTPSession struct {
	srv  *testSMTP
	conn *smtp.Conn
	auth bool
	from string
	to   []string
}

func (s *testSMTPSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *testSMTPSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != testSMTPUser || pass != testSMTPPassword {
			return errors.New("invalid credentials")
		}
		s.auth = true
		return nil
	}), nil
}

func (s *testSMTPSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.auth {
		return smtp.ErrAuthRequired
	}
	if _, ok := s.conn.TLSConnectionState(); !ok && s.srv.mode != SMTPNone {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "TLS required"}
	}
	s.from = from
	return nil
}

func (s *testSMTPSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *testSMTPSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ts := s.srv
	ts.mu.Lock()
	ts.datas++
	n, f := ts.datas, ts.fault
	ts.mu.Unlock()
	if f != nil {
		if err := f(n); err != nil {
			if errors.Is(err, errDropConnection) {
				s.conn.Conn().Close()
			}
			return err
		}
	}
	ts.mu.Lock()
	ts.received = append(ts.received, receivedMail{From: s.from, To: s.to, Data: b})
	ts.mu.Unlock()
	return nil
}

func (s *testSMTPSession) Reset()        { s.from, s.to = "", nil }
func (s *testSMTPSession) Logout() error { return nil }

// selfSignedCert makes a certificate for 127.0.0.1 and the pool that
// trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// withMail has the server send through ts.
func withMail(ts *testSMTP) harnessOption {
	return func(c *Config) { c.Mail = ts.config() }
}

// newMailHarness is a harness sending mail through ts, its links on its
// own query listener.
func newMailHarness(t *testing.T, ts *testSMTP, opts ...harnessOption) *harness {
	t.Helper()
	h := newHarness(t, append([]harnessOption{withMail(ts)}, opts...)...)
	h.srv.cfg.PublicURL = h.query.URL
	return h
}

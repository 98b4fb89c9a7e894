package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// testDomain is the name certificates are for; the test's DNS server and
// dialers send it to loopback.
const testDomain = "tally.test"

// httpsClient trusts roots and dials addr (host:port) whatever the URL's
// host, so that https://tally.test/ reaches the server under test with
// tally.test as SNI. Every request is a new connection: a new handshake.
func httpsClient(roots *x509.CertPool, addr string) *http.Client {
	var d net.Dialer
	return &http.Client{
		Timeout: 90 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, ok := strings.CutPrefix(strings.TrimPrefix(rawURL, "https://"), "http://")
	if !ok && !strings.HasPrefix(rawURL, "https://") {
		t.Fatalf("got URL %q", rawURL)
	}
	return u
}

// startDNS answers every A question with 127.0.0.1 and every other one
// with nothing, over TCP, as the resolver Pebble's validation asks.
func startDNS(t *testing.T) string {
	t.Helper()
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		for _, q := range req.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: handler}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func portOf(t *testing.T, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := net.LookupPort("tcp", p)
	return n
}

// pemFile writes the certificates as PEM to a new file and returns its path.
func pemFile(t *testing.T, certs ...*x509.Certificate) string {
	t.Helper()
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	p := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The binary gets a real certificate from Pebble, Let's Encrypt's test
// CA, run in the test on loopback, over each challenge type it answers,
// serves HTTPS with it, keeps it beside the database, and serves it again
// from there after a restart with the CA gone.
func TestACMECertificateFromPebble(t *testing.T) {
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")      // no random wait before validating
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0") // no nonces refused at random
	bin := buildBinary(t)
	resolver := startDNS(t)
	pebbleLog := log.New(io.Discard, "", 0)
	if testing.Verbose() {
		pebbleLog = log.New(os.Stderr, "pebble ", 0)
	}
	tests := []struct {
		name string
		// tlsALPN says whether Pebble can reach the HTTPS listener: when
		// not, its TLS-ALPN-01 validation fails and the binary must fall
		// back to HTTP-01 on HTTP_ADDR.
		tlsALPN bool
	}{
		{"TLS-ALPN-01", true},
		{"HTTP-01", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The ACME server's address goes into the binary's settings,
			// and the binary's ports into Pebble's validation: serve a
			// placeholder until both are known.
			var acmeHandler atomic.Pointer[http.Handler]
			acme := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := acmeHandler.Load()
				if h == nil {
					http.Error(w, "not ready", http.StatusServiceUnavailable)
					return
				}
				(*h).ServeHTTP(w, r)
			}))
			acme.StartTLS()
			defer acme.Close()

			dbPath := filepath.Join(t.TempDir(), "analytics.db")
			env := []string{"DATABASE_PATH=" + dbPath, "TLS_DOMAINS=" + testDomain,
				"HTTPS_ADDR=127.0.0.1:0", "HTTP_ADDR=127.0.0.1:0",
				"ACME_DIRECTORY_URL=" + acme.URL + wfe.DirectoryPath, "ACME_EMAIL=ops@tally.test",
				// The binary trusts the test ACME server's own certificate
				// (Go reads SSL_CERT_FILE for the system roots).
				"SSL_CERT_FILE=" + pemFile(t, acme.Certificate())}
			p := start(t, bin, env...)
			if p.https == "" || p.http == "" {
				t.Fatalf("got https %q, http %q in the listening line, want both", p.https, p.http)
			}
			tlsPort := portOf(t, hostPort(t, p.https))
			if !tt.tlsALPN {
				tlsPort = closedPort(t)
			}
			store := db.NewMemoryStore()
			authority := ca.New(pebbleLog, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})
			validator := va.New(pebbleLog, portOf(t, hostPort(t, p.http)), tlsPort, false, resolver, store)
			front := wfe.New(pebbleLog, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 3, 5)
			h := front.Handler()
			acmeHandler.Store(&h)

			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(authority.GetRootCert(0).PEM())
			client := httpsClient(roots, hostPort(t, p.https))
			res, err := client.Get("https://" + testDomain + "/healthz")
			if err != nil {
				t.Fatalf("HTTPS with a certificate from Pebble: %v; the server logged %v", err, drain(p.logs))
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
				t.Fatalf("got %d %s, want 200 ok", res.StatusCode, body)
			}
			if leaf := res.TLS.PeerCertificates[0]; !slices.Contains(leaf.DNSNames, testDomain) {
				t.Fatalf("got a certificate for %v, want %s", leaf.DNSNames, testDomain)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dbPath), "acme", testDomain)); err != nil {
				t.Fatalf("certificate not cached beside the database: %v", err)
			}

			// Restarted with the CA gone, it serves the cached certificate.
			p.cmd.Process.Signal(syscall.SIGTERM)
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("got exit %v, want 0", err)
			}
			acme.Close()
			p = start(t, bin, env...)
			res, err = httpsClient(roots, hostPort(t, p.https)).Get("https://" + testDomain + "/healthz")
			if err != nil {
				t.Fatalf("after a restart without the CA: %v", err)
			}
			res.Body.Close()
		})
	}
}

// drain is what logs holds now.
func drain(logs chan map[string]any) []map[string]any {
	var lines []map[string]any
	for {
		select {
		case l, ok := <-logs:
			if !ok {
				return lines
			}
			lines = append(lines, l)
		default:
			return lines
		}
	}
}

// testCA signs leaf certificates for testDomain. Its key is Ed25519, whose
// signatures have one length, so two leaves with serials of one length
// are files of the same size.
type testCA struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tally test CA"},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key}
}

// writeLeaf writes a certificate with serial for testDomain and its key
// to certPath and keyPath, and sets both files' modification time.
func (c *testCA) writeLeaf(t *testing.T, serial int64, certPath, keyPath string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: testDomain}, DNSNames: []string{testDomain},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for path, block := range map[string]*pem.Block{certPath: {Type: "CERTIFICATE", Bytes: der}, keyPath: {Type: "PRIVATE KEY", Bytes: pkcs8}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

// servedSerial is the serial of the certificate a new handshake gets.
func servedSerial(t *testing.T, client *http.Client) int64 {
	t.Helper()
	res, err := client.Get("https://" + testDomain + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.TLS.PeerCertificates[0].SerialNumber.Int64()
}

// Certificates from TLS_CERT_FILE and TLS_KEY_FILE are loaded again on
// SIGHUP and when a file changes, and a pair that does not load leaves the
// previous one in service. The one HTTPS listener sends the collector's
// routes to the collector and the rest to the query API; HTTP_ADDR
// redirects to it.
func TestCertFilesHTTPS(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	authority := newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	mod := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	authority.writeLeaf(t, 1001, certPath, keyPath, mod)
	p := start(t, bin, "DATABASE_PATH=:memory:", "ADMIN_TOKEN=tok", "TLS_CERT_FILE="+certPath, "TLS_KEY_FILE="+keyPath,
		"HTTPS_ADDR=127.0.0.1:0", "HTTP_ADDR=127.0.0.1:0")
	roots := x509.NewCertPool()
	roots.AddCert(authority.cert)
	client := httpsClient(roots, hostPort(t, p.https))

	t.Run("one listener for both APIs", func(t *testing.T) {
		do := func(method, path, token, body string) *http.Response {
			t.Helper()
			req, _ := http.NewRequest(method, "https://"+testDomain+path, strings.NewReader(body))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		tests := []struct {
			method, path, token, body string
			want                      int
			cors                      bool // answered by the collector
		}{
			{"POST", "/v1/workspaces", "tok", `{"name":"Acme","slug":"acme"}`, 201, false},
			{"POST", "/v1/workspaces/acme/sites", "tok", `{"id":"web","name":"Web"}`, 201, false},
			{"POST", "/v1/events", "web", `{"id":"00000000-0000-4000-8000-000000000001","site_id":"web","anon_id":"a","type":"pageview"}`, 202, true},
			{"OPTIONS", "/v1/events", "", "", 204, true},
			{"GET", "/v1/events", "", "", 405, true},
			{"GET", "/v1/sites/web/pageviews?from=2020-01-01&to=2020-01-02", "tok", "", 200, false},
			{"GET", "/v1/workspaces", "", "", 401, false},
			{"GET", "/no/such/route", "", "", 404, false},
		}
		for _, tt := range tests {
			res := do(tt.method, tt.path, tt.token, tt.body)
			if res.StatusCode != tt.want {
				t.Errorf("%s %s: got %d, want %d", tt.method, tt.path, res.StatusCode, tt.want)
			}
			if got := res.Header.Get("Access-Control-Allow-Origin") == "*"; got != tt.cors {
				t.Errorf("%s %s: got answered by the collector %v, want %v", tt.method, tt.path, got, tt.cors)
			}
		}
	})

	t.Run("port 80 redirects", func(t *testing.T) {
		plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		_, httpsPort, _ := net.SplitHostPort(hostPort(t, p.https))
		for _, method := range []string{"GET", "POST"} {
			req, _ := http.NewRequest(method, p.http+"/v1/sites/web/pageviews?from=2020-01-01", nil)
			req.Host = testDomain
			res, err := plain.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			want := "https://" + testDomain + ":" + httpsPort + "/v1/sites/web/pageviews?from=2020-01-01"
			if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != want {
				t.Errorf("%s: got %d to %q, want 308 to %q", method, res.StatusCode, res.Header.Get("Location"), want)
			}
		}
	})

	t.Run("reload", func(t *testing.T) {
		if got := servedSerial(t, client); got != 1001 {
			t.Fatalf("got serial %d, want 1001", got)
		}
		// A new pair that looks unchanged (same size, same time) is
		// served only after SIGHUP.
		authority.writeLeaf(t, 1002, certPath, keyPath, mod)
		if got := servedSerial(t, client); got != 1001 {
			t.Fatalf("got serial %d before SIGHUP with the files' stamps unchanged, want 1001", got)
		}
		p.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(10 * time.Second)
		for servedSerial(t, client) != 1002 {
			if time.Now().After(deadline) {
				t.Fatal("SIGHUP did not reload the certificate")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// A pair written anew is served at the next handshake, no signal.
		authority.writeLeaf(t, 1003, certPath, keyPath, mod.Add(time.Hour))
		if got := servedSerial(t, client); got != 1003 {
			t.Fatalf("got serial %d after the files changed, want 1003", got)
		}
		// A certificate that does not load leaves the previous one.
		if err := os.WriteFile(certPath, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(certPath, mod.Add(2*time.Hour), mod.Add(2*time.Hour))
		if got := servedSerial(t, client); got != 1003 {
			t.Fatalf("got serial %d with a broken file, want 1003 still", got)
		}
		timeout := time.After(10 * time.Second)
		for {
			select {
			case line := <-p.logs:
				if line["msg"] == "TLS certificate not reloaded; the previous one stays in service" {
					return
				}
			case <-timeout:
				t.Fatal("the broken certificate file was not logged")
			}
		}
	})
}

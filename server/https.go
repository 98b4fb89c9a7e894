package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
)

// HTTPS is the TLS side of an instance (docs/operations.md#https): one listener
// that serves the collector and the query API together, for a VM where only
// 443 is open, and a plain one that answers ACME HTTP-01 challenges and
// redirects everything else to HTTPS.
type HTTPS struct {
	// Addr is the HTTPS listener (HTTPS_ADDR).
	Addr string
	// RedirectAddr is the plain listener (HTTP_ADDR); "" for none.
	RedirectAddr string
	// TLS supplies the certificates (GetCertificate) and, for ACME, the
	// acme-tls/1 protocol of TLS-ALPN-01 challenges.
	TLS *tls.Config
	// Challenges wraps the redirect with an ACME HTTP-01 responder
	// (autocert's HTTPHandler); nil when certificates come from files.
	Challenges func(fallback http.Handler) http.Handler
}

// ServeHTTPS binds the listeners of h and serves them until Shutdown,
// setting HTTPSURL and HTTPURL.
func (inst *Instance) ServeHTTPS(h HTTPS) error {
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return fmt.Errorf("HTTPS listener: %w", err)
	}
	var plain net.Listener
	if h.RedirectAddr != "" {
		if plain, err = net.Listen("tcp", h.RedirectAddr); err != nil {
			ln.Close()
			return fmt.Errorf("HTTP listener: %w", err)
		}
	}
	logger := inst.Server.log
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	inst.HTTPSURL = "https://" + strings.TrimPrefix(baseURL(ln.Addr()), "http://")
	inst.HTTPSAddr = ln.Addr()
	secure := inst.Server.newHTTPServer(inst.Server.Shared())
	secure.TLSConfig = h.TLS
	// Handshake failures are mostly scanners; their messages carry the
	// client's address, which logs never do.
	secure.ErrorLog = log.New(handshakeLog{logger}, "", 0)
	inst.servers = append(inst.servers, secure)
	go func() {
		if err := secure.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			inst.failed <- err
		}
	}()
	if plain == nil {
		return nil
	}
	inst.HTTPURL = baseURL(plain.Addr())
	inst.HTTPAddr = plain.Addr()
	var redirect http.Handler = redirectToHTTPS(port)
	if h.Challenges != nil {
		redirect = h.Challenges(redirect)
	}
	insecure := inst.Server.newHTTPServer(redirect)
	inst.servers = append(inst.servers, insecure)
	go func() {
		if err := insecure.Serve(plain); err != nil && !errors.Is(err, http.ErrServerClosed) {
			inst.failed <- err
		}
	}()
	return nil
}

// Shared is the handler of the one HTTPS listener: a request goes to the
// collector when the collector has a route for its path (any method, so
// that its preflights and 405s stay the collector's), and to the query API
// otherwise. The two route sets share only /healthz, which answers alike.
func (s *Server) Shared() http.Handler {
	routes := s.collectorRouter()
	collector, query := cors(routes), s.Query()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range collectorMethods {
			if h, _, _ := routes.Lookup(m, r.URL.Path); h != nil {
				collector.ServeHTTP(w, r)
				return
			}
		}
		query.ServeHTTP(w, r)
	})
}

// collectorMethods are the methods a collector route may have.
var collectorMethods = []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete}

// redirectToHTTPS sends every request to the same host and path over
// HTTPS on port. 308 keeps the method and body, so an SDK configured with
// http:// still delivers its POSTs (once, in the clear).
func redirectToHTTPS(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "a Host header is needed to redirect to HTTPS", http.StatusBadRequest)
			return
		}
		if port != "443" || strings.Contains(host, ":") {
			host = net.JoinHostPort(strings.Trim(host, "[]"), port)
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// handshakeLog is the HTTPS server's error log. Its handshake and panic
// messages start with the client's address ("http: TLS handshake error
// from ADDR: ERR"), which logs never hold: the address is dropped, and the
// error too when it names the connection (read tcp A->B: ...). Failed
// handshakes are mostly scanners and are logged at debug level, except
// ACME failures, which the operator must see.
type handshakeLog struct{ log *slog.Logger }

func (l handshakeLog) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	for _, prefix := range []string{"http: TLS handshake error from ", "http: panic serving "} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		reason := ""
		if _, err, ok := strings.Cut(rest, ": "); ok && !strings.Contains(err, "->") {
			reason = err
		}
		level, what := slog.LevelDebug, "TLS handshake failed"
		switch {
		case strings.HasPrefix(prefix, "http: panic"):
			level, what = slog.LevelError, "panic serving HTTPS"
		case strings.Contains(reason, "acme/autocert") && !strings.Contains(reason, "HostWhitelist") && !strings.Contains(reason, "missing server name"):
			level, what = slog.LevelWarn, "no certificate from the ACME CA"
		}
		l.log.LogAttrs(context.Background(), level, what, slog.String("reason", reason))
		return len(p), nil
	}
	// Other messages (HTTP/2's connection errors, say) may name the
	// address anywhere.
	l.log.Warn(addressPattern.ReplaceAllString(msg, "[address]"))
	return len(p), nil
}

// addressPattern matches an IPv4 address or a bracketed IPv6 one, with
// or without a port.
var addressPattern = regexp.MustCompile(`\[[0-9A-Fa-f:.%a-z0-9]*:[0-9A-Fa-f:.%a-z0-9]*\](:\d+)?|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`)

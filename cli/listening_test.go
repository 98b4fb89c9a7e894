package cli

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// The "listening" line names the addresses the listeners are bound to: an
// all-interfaces bind is logged as such ([::] or 0.0.0.0, with a hint
// naming the listeners the network can reach), never as 127.0.0.1.
func TestListeningLineNamesTheBoundAddress(t *testing.T) {
	t.Parallel()
	tcp := func(ip net.IP, port int) net.Addr { return &net.TCPAddr{IP: ip, Port: port} }
	for _, tt := range []struct {
		name     string
		ls       []boundListener
		want     map[string]string
		hintOpen []string // listeners the hint names; none: no hint
	}{
		{"every interface, IPv4 and IPv6",
			[]boundListener{{"collector", "http", tcp(net.IPv6unspecified, 8080)}, {"query", "http", tcp(net.IPv6unspecified, 8081)}},
			map[string]string{"collector": "http://[::]:8080", "query": "http://[::]:8081"}, []string{"collector ([::]:8080)", "query ([::]:8081)"}},
		{"every IPv4 interface, query local",
			[]boundListener{{"collector", "http", tcp(net.IPv4zero, 8080)}, {"query", "http", tcp(net.IPv4(127, 0, 0, 1), 8081)}},
			map[string]string{"collector": "http://0.0.0.0:8080", "query": "http://127.0.0.1:8081"}, []string{"collector (0.0.0.0:8080)"}},
		{"loopback only",
			[]boundListener{{"collector", "http", tcp(net.IPv4(127, 0, 0, 1), 8080)}, {"query", "http", tcp(net.IPv6loopback, 8081)}},
			map[string]string{"collector": "http://127.0.0.1:8080", "query": "http://[::1]:8081"}, nil},
		{"HTTPS on every interface",
			[]boundListener{{"collector", "http", tcp(net.IPv4(127, 0, 0, 1), 8080)}, {"query", "http", tcp(net.IPv4(127, 0, 0, 1), 8081)},
				{"https", "https", tcp(net.IPv6unspecified, 443)}, {"http", "http", tcp(net.IPv6unspecified, 80)}},
			map[string]string{"https": "https://[::]:443", "http": "http://[::]:80"}, []string{"https ([::]:443)", "http ([::]:80)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			attrs := listenerAttrs(tt.ls)
			got := map[string]string{}
			for i := 0; i+1 < len(attrs); i += 2 {
				got[attrs[i].(string)] = fmt.Sprint(attrs[i+1])
			}
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("got %s %q, want %q", k, got[k], want)
				}
			}
			hint, ok := got["hint"]
			if ok != (len(tt.hintOpen) > 0) {
				t.Fatalf("got hint %q, want one: %v", hint, len(tt.hintOpen) > 0)
			}
			for _, l := range tt.hintOpen {
				if !strings.Contains(hint, l) || !strings.Contains(hint, "every interface") {
					t.Errorf("got hint %q, want it to name %s on every interface", hint, l)
				}
			}
		})
	}
}

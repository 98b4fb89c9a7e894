package cli

import (
	"fmt"
	"net"
	"strings"

	"github.com/tally-analytics/tally/server"
)

// boundListener is one listener of the "listening" log line: its name
// there, its URL scheme and the address it is bound to.
type boundListener struct {
	name, scheme string
	addr         net.Addr
}

// listeners are inst's bound listeners, those of ServeHTTPS included.
func listeners(inst *server.Instance) []boundListener {
	ls := []boundListener{{"collector", "http", inst.CollectorAddr}, {"query", "http", inst.QueryAddr}}
	if inst.HTTPSAddr != nil {
		ls = append(ls, boundListener{"https", "https", inst.HTTPSAddr})
	}
	if inst.HTTPAddr != nil {
		ls = append(ls, boundListener{"http", "http", inst.HTTPAddr})
	}
	return ls
}

// listenerAttrs are the "listening" log line's attributes: each
// listener's URL as bound, which for an all-interfaces bind is
// http://[::]:8080 (or 0.0.0.0), never the 127.0.0.1 it was once logged as,
// so that an operator sees what the network can reach; then a hint naming
// the listeners open to every interface, if any.
func listenerAttrs(ls []boundListener) []any {
	var attrs []any
	var open []string
	for _, l := range ls {
		attrs = append(attrs, l.name, l.scheme+"://"+l.addr.String())
		if tcp, ok := l.addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
			open = append(open, fmt.Sprintf("%s (%s)", l.name, l.addr))
		}
	}
	if len(open) > 0 {
		attrs = append(attrs, "hint", "listening on every interface of this host, reachable from other machines: "+
			strings.Join(open, ", ")+"; from this machine use 127.0.0.1, and bind 127.0.0.1:<port> to keep a listener local")
	}
	return attrs
}

package posenc

import (
	"net"
	"strconv"
	"strings"
)

// ParseAddress turns a server address into a network and an address for net.Dial: "host:port",
// "tcp://host:port", "[::1]:port" (TCP), "unix:/path", "unix:///path", or a path starting with "/" or
// "./" (a Unix socket). A bad one is an *ArgumentError naming "address".
func ParseAddress(address string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(address, "unix:"):
		path := strings.TrimPrefix(address, "unix:")
		if strings.HasPrefix(path, "///") {
			path = path[2:]
		}
		if path == "" {
			return "", "", argError("address", "%q names no socket path", address)
		}
		return "unix", path, nil
	case strings.HasPrefix(address, "/") || strings.HasPrefix(address, "./"):
		return "unix", address, nil
	}
	hostPort := strings.TrimPrefix(address, "tcp://")
	host, port, splitErr := net.SplitHostPort(hostPort)
	if splitErr != nil || host == "" {
		return "", "", argError("address", "must be 'host:port' or 'unix:/path', got %q", address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", argError("address", "port must be in 1..65535, got %q", port)
	}
	return "tcp", net.JoinHostPort(host, port), nil
}

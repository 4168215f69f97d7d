package posenc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client or a Conn; the zero value gives the defaults.
type Options struct {
	PoolSize    int           // connections of a Client (default 4)
	Timeout     time.Duration // for calls whose context has no deadline (default 30 s; negative: none)
	DialTimeout time.Duration // for connecting (default 10 s; negative: none)
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.PoolSize <= 0 {
		out.PoolSize = 4
	}
	if out.Timeout == 0 {
		out.Timeout = 30 * time.Second
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = 10 * time.Second
	}
	return out
}

// Client is a pool of connections to one posenc binary server, safe for concurrent use. Each call
// takes the next connection in turn (dialled on first use, redialled once it has ended), where it is
// pipelined with the other calls on it (Conn). A call whose connection ended before its reply (a
// server restart or drain, an idle close: a *ConnError) is sent once more on a new connection, where
// table names are resolved again: every operation only reads, so a second send is harmless.
type Client struct {
	network, addr string
	opts          Options
	slots         []slot
	next          atomic.Uint32
	closed        atomic.Bool
}

type slot struct {
	mu   sync.Mutex
	conn *Conn
}

// NewClient returns a Client of address ("host:port", "unix:/path", a path; see ParseAddress). It
// connects on the first call. opts may be nil.
func NewClient(address string, opts *Options) (*Client, error) {
	network, addr, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	return &Client{network: network, addr: addr, opts: o, slots: make([]slot, o.PoolSize)}, nil
}

// PoolSize is the most connections the client holds.
func (c *Client) PoolSize() int { return len(c.slots) }

// Close closes every connection; calls in flight fail, later calls get ErrClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	for i := range c.slots {
		s := &c.slots[i]
		s.mu.Lock()
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
	}
	return nil
}

// conn is the next slot's connection, dialled if it has none or it has ended.
func (c *Client) conn(ctx context.Context) (*Conn, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	s := &c.slots[int(c.next.Add(1))%len(c.slots)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.Err() != nil {
		cn, err := dialConn(ctx, c.network, c.addr, c.opts)
		if err != nil {
			return nil, err
		}
		s.conn = cn
	}
	return s.conn, nil
}

// do runs a call on a pooled connection, and once more on another if the first ended under it.
func (c *Client) do(ctx context.Context, call func(*Conn) error) error {
	for attempt := 0; ; attempt++ {
		cn, err := c.conn(ctx)
		if err != nil {
			return err
		}
		err = call(cn)
		var lost *ConnError
		if attempt == 0 && errors.As(err, &lost) && !errors.Is(lost.Err, ErrClosed) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// Ping sends payload and returns the bytes the server echoed.
func (c *Client) Ping(ctx context.Context, payload []byte) (out []byte, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.Ping(ctx, payload); return err })
	return out, err
}

// Stats returns the server's counters and limits.
func (c *Client) Stats(ctx context.Context) (out *Stats, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.Stats(ctx); return err })
	return out, err
}

// ListTables returns every published table, sorted by name.
func (c *Client) ListTables(ctx context.Context) (out []ListedTable, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.ListTables(ctx); return err })
	return out, err
}

// Resolve asks the server for a table's id and description (cached by the connection it used).
func (c *Client) Resolve(ctx context.Context, name string) (out *TableInfo, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.Resolve(ctx, name); return err })
	return out, err
}

// Encode returns the rows of a published table (stored, or a named computed encoding) at positions,
// as dtype; each connection resolves the name once.
func (c *Client) Encode(ctx context.Context, table string, positions Positions, dtype Dtype) (out *Rows, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.Encode(ctx, table, positions, dtype); return err })
	return out, err
}

// EncodeID is Encode with a table id (TableInfo.ID). Ids belong to the server process: a restarted
// server gives others, which Encode (by name) resolves again and EncodeID cannot know.
func (c *Client) EncodeID(ctx context.Context, id uint32, positions Positions, dtype Dtype) (out *Rows, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.EncodeID(ctx, id, positions, dtype); return err })
	return out, err
}

// EncodeSpec returns the rows the server computes for an inline spec at positions, as dtype.
func (c *Client) EncodeSpec(ctx context.Context, spec *InlineSpec, positions Positions, dtype Dtype) (
	out *Rows, err error) {
	err = c.do(ctx, func(cn *Conn) error { out, err = cn.EncodeSpec(ctx, spec, positions, dtype); return err })
	return out, err
}

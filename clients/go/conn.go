package posenc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Conn is one connection to a posenc binary server, safe for concurrent use. Calls from many
// goroutines are pipelined: each frame is queued and written at once, frames queued while a write is
// under way go out together in the next one, and a reader goroutine hands each reply to its caller by
// request id (so a call that gave up never receives another's reply). RESOLVE is cached per table
// name: table ids belong to the server process, and a new Conn resolves again.
//
// A Conn does not reconnect: once it ends (Done), every call fails with a *ConnError. Client is a pool
// of Conns that replaces ended ones.
type Conn struct {
	nc      net.Conn
	timeout time.Duration // for calls whose context has no deadline (0: none)

	wmu      sync.Mutex
	wbuf     []byte // frames waiting to be written
	spare    []byte // the buffer of the previous write, reused
	flushing bool   // a goroutine is writing wbuf out

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	tables  map[string]*resolving
	err     error // why the connection ended; nil while it is up

	done chan struct{}
}

// call is one request in flight; done is closed once header, payload and err are set.
type call struct {
	done    chan struct{}
	header  replyHeader
	payload []byte
	err     error
}

// resolving is a name's RESOLVE, shared by the calls that need it at the same time.
type resolving struct {
	done chan struct{}
	info *TableInfo
	err  error
}

const (
	// flushRounds is how many writes a caller makes for the frames others queued meanwhile, before it
	// hands the writing to a new goroutine and returns to its own call.
	flushRounds = 4
	// keepBuffer is the largest write buffer kept for the next write.
	keepBuffer = 1 << 20
)

// DialConn connects to address ("host:port", "unix:/path", a path; see ParseAddress) and returns the
// connection, its reader running. opts may be nil (Options' defaults).
func DialConn(ctx context.Context, address string, opts *Options) (*Conn, error) {
	network, addr, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	return dialConn(ctx, network, addr, opts.withDefaults())
}

func dialConn(ctx context.Context, network, addr string, opts Options) (*Conn, error) {
	if opts.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.DialTimeout)
		defer cancel()
	}
	var dialer net.Dialer // TCP_NODELAY is Go's default
	nc, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, timeout: opts.Timeout, pending: map[uint64]*call{}, tables: map[string]*resolving{},
		done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is up; then io.EOF if the server ended it cleanly after its last
// reply (a drain, an idle close without a frame), the *ServerError that closed it (IDLE_TIMEOUT,
// SHUTTING_DOWN, ...), ErrClosed after Close, or the network error.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; calls in flight fail with a *ConnError wrapping ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

// roundTrip sends a request and waits for its reply: the header and the payload after it, or the
// *ServerError the server answered, a *ConnError, an *ArgumentError, or the context's error.
func (c *Conn) roundTrip(ctx context.Context, r *request) (replyHeader, []byte, error) {
	if err := r.check(); err != nil {
		return replyHeader{}, nil, err
	}
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	cl := &call{done: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return replyHeader{}, nil, &ConnError{Err: err}
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	c.send(r, id)
	select {
	case <-cl.done:
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id) // a late reply is dropped by the reader
		c.mu.Unlock()
		select {
		case <-cl.done: // it came meanwhile
		default:
			return replyHeader{}, nil, ctx.Err()
		}
	}
	return cl.header, cl.payload, cl.err
}

// send queues a frame and writes the queue unless another goroutine is writing it already.
func (c *Conn) send(r *request, id uint64) {
	c.wmu.Lock()
	c.wbuf = r.appendFrame(c.wbuf, id)
	if c.flushing {
		c.wmu.Unlock()
		return
	}
	c.flushing = true
	c.wmu.Unlock()
	c.flush()
}

// flush writes the queued frames, flushRounds writes at most, then leaves the rest to a new goroutine.
// A failed write ends the connection (a frame may be half written).
func (c *Conn) flush() {
	for round := 0; round < flushRounds; round++ {
		c.wmu.Lock()
		if len(c.wbuf) == 0 {
			c.flushing = false
			c.wmu.Unlock()
			return
		}
		out := c.wbuf
		c.wbuf, c.spare = c.spare[:0], nil
		c.wmu.Unlock()
		_, err := c.nc.Write(out)
		c.wmu.Lock()
		if cap(out) <= keepBuffer {
			c.spare = out[:0]
		}
		if err != nil {
			c.flushing = false
			c.wbuf = c.wbuf[:0]
			c.wmu.Unlock()
			c.fail(err)
			return
		}
		c.wmu.Unlock()
	}
	go c.flush()
}

// readLoop reads replies until the stream ends, handing each to its call.
func (c *Conn) readLoop() {
	in := bufio.NewReaderSize(c.nc, 64<<10)
	var head [HeaderSize]byte
	for {
		if _, err := io.ReadFull(in, head[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("posenc: the stream ended inside a reply header")
			}
			c.fail(err) // io.EOF: a clean end, between replies
			return
		}
		h, err := parseReplyHeader(head[:])
		if err != nil {
			c.fail(err)
			return
		}
		payload := make([]byte, h.length-HeaderSize)
		if _, err := io.ReadFull(in, payload); err != nil {
			c.fail(fmt.Errorf("posenc: the stream ended inside a reply (%v)", err))
			return
		}
		if h.status != StatusOK {
			se := newServerError(h, string(payload[:h.auxLen]))
			if se.Closes() {
				c.fail(se)
				return
			}
			c.deliver(h, nil, se)
			continue
		}
		c.deliver(h, payload, nil)
	}
}

func (c *Conn) deliver(h replyHeader, payload []byte, err error) {
	c.mu.Lock()
	cl := c.pending[h.requestID]
	delete(c.pending, h.requestID)
	c.mu.Unlock()
	if cl == nil {
		return // its caller gave up
	}
	cl.header, cl.payload, cl.err = h, payload, err
	close(cl.done)
}

// fail ends the connection once, with cause: every call in flight gets a *ConnError.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	pending := c.pending
	c.pending = map[uint64]*call{}
	c.mu.Unlock()
	for _, cl := range pending {
		cl.err = &ConnError{Err: cause}
		close(cl.done)
	}
	c.nc.Close()
	close(c.done)
}

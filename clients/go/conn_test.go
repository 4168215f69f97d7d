package posenc

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// peer is the other end of a connection in these tests: it reads request frames and writes the reply
// bytes a test scripts, to check how the client frames, matches and fails.
type peer struct {
	ln       net.Listener
	accepted atomic.Int32
}

type frame struct {
	opcode    Opcode
	requestID uint64
	tableID   uint32
	aux       []byte
}

func listen(t *testing.T, serve func(c net.Conn, p *peer)) *peer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go func() { defer c.Close(); serve(c, p) }()
		}
	}()
	return p
}

func (p *peer) address() string { return p.ln.Addr().String() }

func readFrame(c net.Conn) (frame, error) {
	head := make([]byte, HeaderSize)
	if _, err := io.ReadFull(c, head); err != nil {
		return frame{}, err
	}
	body := make([]byte, binary.LittleEndian.Uint32(head)-HeaderSize)
	if _, err := io.ReadFull(c, body); err != nil {
		return frame{}, err
	}
	auxLen := binary.LittleEndian.Uint32(head[24:])
	return frame{Opcode(head[5]), binary.LittleEndian.Uint64(head[8:]), binary.LittleEndian.Uint32(head[16:]),
		body[:auxLen]}, nil
}

// replyFrame is a reply: status OK with aux (and no rows), or an error whose aux is the text.
func replyFrame(f frame, status Status, tableID uint32, aux string) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(aux))
	binary.LittleEndian.PutUint32(b, uint32(HeaderSize+len(aux)))
	b[4], b[5], b[6] = 1, byte(f.opcode), byte(status)
	binary.LittleEndian.PutUint64(b[8:], f.requestID)
	binary.LittleEndian.PutUint32(b[24:], uint32(len(aux)))
	binary.LittleEndian.PutUint32(b[28:], tableID)
	if status.Closes() {
		b[5] = 0
		binary.LittleEndian.PutUint64(b[8:], 0)
	}
	return append(b, aux...)
}

func TestRepliesAreMatchedByRequestID(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		first, _ := readFrame(c)
		second, _ := readFrame(c)
		c.Write(append(replyFrame(second, StatusOK, 0, string(second.aux)), replyFrame(first, StatusOK, 0,
			string(first.aux))...))
	})
	conn, err := DialConn(context.Background(), p.address(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	for _, payload := range []string{"first", "second"} {
		wg.Add(1)
		go func(payload string) {
			defer wg.Done()
			got, err := conn.Ping(context.Background(), []byte(payload))
			if err != nil || string(got) != payload {
				t.Errorf("%s: %q %v", payload, got, err)
			}
		}(payload)
		time.Sleep(20 * time.Millisecond) // "first" is written first
	}
	wg.Wait()
}

func TestAnErrorThatClosesFailsEveryCallInFlight(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		f, _ := readFrame(c)
		readFrame(c)
		c.Write(replyFrame(f, StatusIdleTimeout, 0, "connection: closed after 1000 ms without traffic"))
	})
	conn, _ := DialConn(context.Background(), p.address(), nil)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { _, err := conn.Ping(context.Background(), nil); errs <- err }()
	}
	for i := 0; i < 2; i++ {
		var lost *ConnError
		var server *ServerError
		if err := <-errs; !errors.As(err, &lost) || !errors.As(err, &server) || server.Status != StatusIdleTimeout {
			t.Fatalf("got %v", err)
		}
	}
	<-conn.Done()
	if _, err := conn.Ping(context.Background(), nil); !errors.As(err, new(*ConnError)) {
		t.Fatalf("a call on an ended connection: %v", err)
	}
}

func TestAnErrorReplyAnswersOneCall(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		f, _ := readFrame(c)
		c.Write(replyFrame(f, StatusUnknownTable, 0, "name: no published table named 'x'"))
		f, _ = readFrame(c)
		c.Write(replyFrame(f, StatusOK, 0, "still here"))
	})
	conn, _ := DialConn(context.Background(), p.address(), nil)
	defer conn.Close()
	var server *ServerError
	if _, err := conn.Resolve(context.Background(), "x"); !errors.As(err, &server) || server.Field != "name" ||
		server.Status != StatusUnknownTable {
		t.Fatalf("got %v", err)
	}
	if got, err := conn.Ping(context.Background(), nil); err != nil || string(got) != "still here" {
		t.Fatalf("%q %v", got, err)
	}
}

func TestACleanEndIsEOF(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		f, _ := readFrame(c)
		c.Write(replyFrame(f, StatusOK, 0, ""))
	})
	conn, _ := DialConn(context.Background(), p.address(), nil)
	if _, err := conn.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	<-conn.Done()
	if !errors.Is(conn.Err(), io.EOF) {
		t.Fatalf("%v", conn.Err())
	}
}

func TestATimedOutCallLeavesTheConnectionUsable(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		slow, _ := readFrame(c)
		next, _ := readFrame(c)
		c.Write(replyFrame(slow, StatusOK, 0, "late")) // dropped: its caller gave up
		c.Write(replyFrame(next, StatusOK, 0, "next"))
	})
	conn, _ := DialConn(context.Background(), p.address(), nil)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := conn.Ping(ctx, []byte("slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if got, err := conn.Ping(context.Background(), nil); err != nil || string(got) != "next" {
		t.Fatalf("%q %v", got, err)
	}
}

// A Client resolves a name once per connection, shared by concurrent callers, and when its connection
// ends before a reply it sends the call again on a new one, resolving the name there again.
func TestClientResolvesOncePerConnectionAndRetriesOnANewOne(t *testing.T) {
	var resolves atomic.Int32
	p := listen(t, func(c net.Conn, p *peer) {
		for {
			f, err := readFrame(c)
			if err != nil {
				return
			}
			switch {
			case f.opcode == OpResolve:
				resolves.Add(1)
				c.Write(replyFrame(f, StatusOK, uint32(p.accepted.Load()), `{"name":"t","generation":1}`))
			case p.accepted.Load() == 1:
				return // the first connection ends without answering
			default:
				body := make([]byte, HeaderSize, HeaderSize+4)
				copy(body, replyFrame(f, StatusOK, f.tableID, ""))
				binary.LittleEndian.PutUint32(body, HeaderSize+4)
				binary.LittleEndian.PutUint32(body[16:], 1)
				binary.LittleEndian.PutUint32(body[20:], 1)
				c.Write(append(body, 0, 0, 0x80, 0x3f)) // one float32 row of 1.0
			}
		}
	})
	client, _ := NewClient(p.address(), &Options{PoolSize: 1})
	defer client.Close()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := client.Encode(context.Background(), "t", Int64s{0}, Float32)
			if err != nil {
				t.Error(err)
				return
			}
			if v, _ := rows.Float32s(); v[0] != 1 {
				t.Errorf("%v", v)
			}
		}()
	}
	wg.Wait()
	if p.accepted.Load() != 2 || resolves.Load() != 2 {
		t.Fatalf("%d connections, %d resolves: want 2 and 2 (one each)", p.accepted.Load(), resolves.Load())
	}
}

func TestLocalRefusalsSendNothing(t *testing.T) {
	p := listen(t, func(c net.Conn, _ *peer) {
		if _, err := readFrame(c); err == nil {
			t.Error("a refused call reached the peer")
		}
	})
	conn, _ := DialConn(context.Background(), p.address(), nil)
	for name, call := range map[string]func() error{
		"name":      func() error { _, err := conn.Resolve(context.Background(), "../x"); return err },
		"dtype":     func() error { _, err := conn.EncodeID(context.Background(), 1, Int64s{0}, Dtype(7)); return err },
		"positions": func() error { _, err := conn.EncodeID(context.Background(), 1, nil, Float32); return err },
		"spec.freqs": func() error {
			_, err := conn.EncodeSpec(context.Background(), &InlineSpec{NFreq: 1, RowWidth: 1}, Int64s{0}, Float32)
			return err
		},
	} {
		var arg *ArgumentError
		if err := call(); !errors.As(err, &arg) || arg.Field != name {
			t.Errorf("%s: %v", name, err)
		}
	}
	conn.Close()
}

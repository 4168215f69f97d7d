package posenc

import (
	"context"
	"encoding/json"
	"fmt"

	"posenc.dev/posenc/internal/tablename"
)

// TableInfo is a table as RESOLVE (and LIST_TABLES) describe it (docs/protocol.md, "RESOLVE JSON").
type TableInfo struct {
	ID         uint32          `json:"id"`
	Name       string          `json:"name"`
	Generation uint64          `json:"generation"`
	Dtype      string          `json:"dtype"`    // how rows are stored: "float32" or "float64" (computed: the default)
	Computed   bool            `json:"computed"` // a named computed encoding: rows computed on request
	Rows       int64           `json:"rows"`     // Stop - Start
	Width      int             `json:"width"`
	Start      int64           `json:"start"`
	Stop       int64           `json:"stop"`
	SpecHash   string          `json:"spec_hash"`
	CreatedNs  int64           `json:"created_ns"`
	WriterPid  int64           `json:"writer_pid"`
	Spec       json.RawMessage `json:"spec"` // the table spec as the store holds it
}

// ListedTable is one entry of LIST_TABLES: a table (Error empty), or a name that cannot be served
// (failed validation, no table id left) and why.
type ListedTable struct {
	TableInfo
	Error string `json:"error"`
}

// Stats is the server's STATS object; Raw holds all of it (keys this client does not name included).
type Stats struct {
	Server        string            `json:"server"`
	Version       string            `json:"version"`
	Protocol      int               `json:"protocol"`
	ISA           *string           `json:"isa"`
	IO            string            `json:"io"`
	Threads       int               `json:"threads"`
	UptimeS       float64           `json:"uptime_s"`
	RequestsTotal uint64            `json:"requests_total"`
	ErrorsTotal   uint64            `json:"errors_total"`
	Positions     uint64            `json:"positions"`
	Connections   map[string]uint64 `json:"connections"`
	Requests      map[string]uint64 `json:"requests"`
	Errors        map[string]uint64 `json:"errors"`
	Limits        Limits            `json:"limits"`
	Raw           json.RawMessage   `json:"-"`
}

// Limits are the server's limits (its flags), as STATS reports them.
type Limits struct {
	MaxFrameBytes    uint64 `json:"max_frame_bytes"`
	MaxPositions     uint64 `json:"max_positions"`
	MaxResponseBytes uint64 `json:"max_response_bytes"`
	MaxConnections   uint64 `json:"max_connections"`
	IdleTimeoutMs    uint64 `json:"idle_timeout_ms"`
	DrainTimeoutMs   uint64 `json:"drain_timeout_ms"`
	MaxDim           uint64 `json:"max_dim"`
	MaxAbsPosition   uint64 `json:"max_abs_position"`
	MaxTableIDs      uint64 `json:"max_table_ids"`
}

// Ping sends payload and returns the bytes the server echoed.
func (c *Conn) Ping(ctx context.Context, payload []byte) ([]byte, error) {
	h, body, err := c.roundTrip(ctx, &request{opcode: OpPing, aux: payload})
	if err != nil {
		return nil, err
	}
	return body[:h.auxLen], nil
}

// Stats returns the server's counters and limits.
func (c *Conn) Stats(ctx context.Context) (*Stats, error) {
	var stats Stats
	raw, err := c.jsonCall(ctx, OpStats, &stats)
	if err != nil {
		return nil, err
	}
	stats.Raw = raw
	return &stats, nil
}

// ListTables returns every published table, sorted by name.
func (c *Conn) ListTables(ctx context.Context) ([]ListedTable, error) {
	var tables []ListedTable
	if _, err := c.jsonCall(ctx, OpListTables, &tables); err != nil {
		return nil, err
	}
	return tables, nil
}

func (c *Conn) jsonCall(ctx context.Context, op Opcode, into any) (json.RawMessage, error) {
	h, body, err := c.roundTrip(ctx, &request{opcode: op})
	if err != nil {
		return nil, err
	}
	raw := json.RawMessage(body[:h.auxLen])
	if err := json.Unmarshal(raw, into); err != nil {
		return nil, fmt.Errorf("posenc: %v reply is not the JSON the protocol describes: %w", op, err)
	}
	return raw, nil
}

// Resolve asks the server for a table's id and description, and caches it for Encode.
func (c *Conn) Resolve(ctx context.Context, name string) (*TableInfo, error) {
	info, err := c.resolve(ctx, name)
	if err == nil {
		done := &resolving{done: make(chan struct{}), info: info}
		close(done.done)
		c.mu.Lock()
		c.tables[name] = done
		c.mu.Unlock()
	}
	return info, err
}

func (c *Conn) resolve(ctx context.Context, name string) (*TableInfo, error) {
	if err := tablename.Check(name); err != nil {
		return nil, argError("name", "%v", err)
	}
	h, body, err := c.roundTrip(ctx, &request{opcode: OpResolve, aux: []byte(name)})
	if err != nil {
		return nil, err
	}
	var info TableInfo
	if err := json.Unmarshal(body[:h.auxLen], &info); err != nil {
		return nil, fmt.Errorf("posenc: RESOLVE reply is not the JSON the protocol describes: %w", err)
	}
	info.ID = h.tableID
	return &info, nil
}

// TableID is the id of a table name on this connection: resolved once, by one call when several need
// it at the same time, then cached.
func (c *Conn) TableID(ctx context.Context, name string) (uint32, error) {
	for {
		c.mu.Lock()
		r := c.tables[name]
		if r == nil {
			r = &resolving{done: make(chan struct{})}
			c.tables[name] = r
			c.mu.Unlock()
			r.info, r.err = c.resolve(ctx, name)
			if r.err != nil {
				c.mu.Lock()
				if c.tables[name] == r {
					delete(c.tables, name) // a later call asks again
				}
				c.mu.Unlock()
			}
			close(r.done)
		} else {
			c.mu.Unlock()
			select {
			case <-r.done:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if r.err != nil && ctx.Err() == nil && (r.err == context.Canceled || r.err == context.DeadlineExceeded) {
			continue // the call that resolved gave up; this one has time left
		}
		if r.err != nil {
			return 0, r.err
		}
		return r.info.ID, nil
	}
}

// Encode returns the rows of a published table (a stored table or a named computed encoding) at
// positions, as dtype. The name is resolved on first use (TableID).
func (c *Conn) Encode(ctx context.Context, table string, positions Positions, dtype Dtype) (*Rows, error) {
	id, err := c.TableID(ctx, table)
	if err != nil {
		return nil, err
	}
	return c.EncodeID(ctx, id, positions, dtype)
}

// EncodeID is Encode with a table id this connection's server gave (TableInfo.ID, TableID).
func (c *Conn) EncodeID(ctx context.Context, id uint32, positions Positions, dtype Dtype) (*Rows, error) {
	return c.rows(ctx, &request{opcode: OpEncodeTable, dtype: dtype, tableID: id, positions: positions})
}

// EncodeSpec returns the rows the server computes for an inline spec at positions, as dtype.
func (c *Conn) EncodeSpec(ctx context.Context, spec *InlineSpec, positions Positions, dtype Dtype) (*Rows, error) {
	if spec == nil {
		return nil, argError("spec", "is required")
	}
	return c.rows(ctx, &request{opcode: OpEncodeSpec, dtype: dtype, spec: spec, positions: positions})
}

func (c *Conn) rows(ctx context.Context, r *request) (*Rows, error) {
	if r.dtype.Size() == 0 {
		return nil, argError("dtype", "unknown dtype code %d; choose Float32, Float16, BFloat16 or Float64", r.dtype)
	}
	if r.positions == nil {
		return nil, argError("positions", "are required (Int64s, Float64s or a Range)")
	}
	h, body, err := c.roundTrip(ctx, r)
	if err != nil {
		return nil, err
	}
	return &Rows{Dtype: h.dtype, N: int(h.rows), Width: int(h.width), Data: body[h.auxLen:]}, nil
}

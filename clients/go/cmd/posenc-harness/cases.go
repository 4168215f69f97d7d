package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"posenc.dev/posenc"
)

// testCase is one case of tests/clients/cases.py's list (its README says what each field means).
type testCase struct {
	ID             string   `json:"id"`
	Op             string   `json:"op"`
	Table          *string  `json:"table"`
	TableID        *uint32  `json:"table_id"`
	Dtype          string   `json:"dtype"`
	PositionKind   string   `json:"position_kind"`
	Positions      []int64  `json:"positions"`
	PositionsBits  []string `json:"positions_bits"`
	PositionsRange *struct {
		Start int64  `json:"start"`
		Count uint64 `json:"count"`
	} `json:"positions_range"`
	Spec       *caseSpec       `json:"spec"`
	PayloadHex string          `json:"payload_hex"`
	Expect     json.RawMessage `json:"expect"`
}

type caseSpec struct {
	NFreq         uint32    `json:"n_freq"`
	RowWidth      uint32    `json:"row_width"`
	SinBase       uint32    `json:"sin_base"`
	CosBase       uint32    `json:"cos_base"`
	NCos          uint32    `json:"n_cos"`
	Flags         uint32    `json:"flags"`
	AmplitudeBits string    `json:"amplitude_bits"`
	FreqsBits     []string  `json:"freqs_bits"`
	ScaleBits     *[]string `json:"scale_bits"`
}

type expectation struct {
	Rows       *int    `json:"rows"`
	Width      int     `json:"width"`
	Dtype      string  `json:"dtype"`
	DataHex    string  `json:"data_hex"`
	ValuesHex  string  `json:"values_hex"`
	PayloadHex *string `json:"payload_hex"`
	Table      *struct {
		Name     string `json:"name"`
		Dtype    string `json:"dtype"`
		Computed bool   `json:"computed"`
		Rows     int64  `json:"rows"`
		Width    int    `json:"width"`
		Start    int64  `json:"start"`
		Stop     int64  `json:"stop"`
		SpecHash string `json:"spec_hash"`
	} `json:"table"`
	Tables []struct {
		Name          string `json:"name"`
		Computed      *bool  `json:"computed"`
		ErrorContains string `json:"error_contains"`
	} `json:"tables"`
	JSONSubset json.RawMessage `json:"json_subset"`
	Error      *struct {
		Status          int    `json:"status"`
		Name            string `json:"name"`
		Field           string `json:"field"`
		MessageContains string `json:"message_contains"`
	} `json:"error"`
	RefusedLocally *struct {
		Field string `json:"field"`
	} `json:"refused_locally"`
}

// runCases runs every case in order on one client and prints a line for each.
func runCases(path, address string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	client, err := posenc.NewClient(address, nil)
	if err != nil {
		return err
	}
	defer client.Close()
	for i := range file.Cases {
		c := &file.Cases[i]
		detail := runCase(client, c)
		emit(map[string]any{"id": c.ID, "ok": detail == "", "detail": detail})
	}
	return nil
}

// runCase is "" when the case passes, else why not.
func runCase(client *posenc.Client, c *testCase) string {
	var want expectation
	if err := json.Unmarshal(c.Expect, &want); err != nil {
		return "unreadable expect: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := call(ctx, client, c)
	if detail, judged := judgeError(err, &want); judged {
		return detail
	}
	switch {
	case want.Rows != nil:
		return compareRows(got.(*posenc.Rows), &want)
	case want.PayloadHex != nil:
		return differs("payload", hex.EncodeToString(got.([]byte)), *want.PayloadHex)
	case want.Table != nil:
		return compareTable(got.(*posenc.TableInfo), &want)
	case want.Tables != nil:
		return compareListing(got.([]posenc.ListedTable), &want)
	case want.JSONSubset != nil:
		return compareSubset(got.(*posenc.Stats).Raw, want.JSONSubset)
	}
	return "the case expects nothing this runner knows"
}

// call runs the case's operation on the client.
func call(ctx context.Context, client *posenc.Client, c *testCase) (any, error) {
	switch c.Op {
	case "ping":
		payload, err := hex.DecodeString(c.PayloadHex)
		if err != nil {
			return nil, err
		}
		return client.Ping(ctx, payload)
	case "stats":
		return client.Stats(ctx)
	case "list_tables":
		return client.ListTables(ctx)
	case "resolve":
		return client.Resolve(ctx, *c.Table)
	}
	dtype, err := posenc.ParseDtype(c.Dtype)
	if err != nil {
		return nil, err
	}
	positions, err := c.positions()
	if err != nil {
		return nil, err
	}
	switch {
	case c.Op == "encode_spec":
		spec, err := c.Spec.inline()
		if err != nil {
			return nil, err
		}
		return client.EncodeSpec(ctx, spec, positions, dtype)
	case c.Op == "encode_table" && c.TableID != nil:
		return client.EncodeID(ctx, *c.TableID, positions, dtype)
	case c.Op == "encode_table":
		return client.Encode(ctx, *c.Table, positions, dtype)
	}
	return nil, fmt.Errorf("unknown op %q", c.Op)
}

func (c *testCase) positions() (posenc.Positions, error) {
	switch {
	case c.PositionsRange != nil:
		return posenc.Range{Start: c.PositionsRange.Start, Count: c.PositionsRange.Count}, nil
	case c.PositionKind == "float64":
		values, err := float64s(c.PositionsBits)
		return posenc.Float64s(values), err
	}
	return posenc.Int64s(c.Positions), nil
}

func (s *caseSpec) inline() (*posenc.InlineSpec, error) {
	amplitude, err := float64s([]string{s.AmplitudeBits})
	if err != nil {
		return nil, err
	}
	freqs, err := float64s(s.FreqsBits)
	if err != nil {
		return nil, err
	}
	spec := &posenc.InlineSpec{NFreq: s.NFreq, RowWidth: s.RowWidth, SinBase: s.SinBase, CosBase: s.CosBase,
		NCos: s.NCos, Flags: s.Flags, Amplitude: amplitude[0], Freqs: freqs}
	if s.ScaleBits != nil {
		if spec.Scale, err = float64s(*s.ScaleBits); err == nil && spec.Scale == nil {
			spec.Scale = []float64{}
		}
	}
	return spec, err
}

// float64s decodes float64 bit patterns written as 16 hex digits.
func float64s(bits []string) ([]float64, error) {
	var out []float64
	for _, b := range bits {
		u, err := strconv.ParseUint(b, 16, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, math.Float64frombits(u))
	}
	return out, nil
}

// judgeError compares an error outcome with an error or refusal expectation; judged is false when the
// call succeeded and a success was expected.
func judgeError(err error, want *expectation) (detail string, judged bool) {
	var server *posenc.ServerError
	var local *posenc.ArgumentError
	switch {
	case want.Error != nil:
		w := want.Error
		if !errors.As(err, &server) {
			return fmt.Sprintf("expected %s, got %v", w.Name, err), true
		}
		if int(server.Status) != w.Status || server.Status.String() != w.Name || server.Field != w.Field ||
			!strings.Contains(server.Message, w.MessageContains) {
			return fmt.Sprintf("expected %d %s %s: ...%s..., got %v", w.Status, w.Name, w.Field, w.MessageContains,
				server), true
		}
		return "", true
	case want.RefusedLocally != nil:
		if !errors.As(err, &local) || local.Field != want.RefusedLocally.Field {
			return fmt.Sprintf("expected a local refusal naming %s, got %v", want.RefusedLocally.Field, err), true
		}
		return "", true
	case err != nil:
		return "unexpected error: " + err.Error(), true
	}
	return "", false
}

func compareRows(rows *posenc.Rows, want *expectation) string {
	if rows.N != *want.Rows || rows.Width != want.Width || rows.Dtype.String() != want.Dtype {
		return fmt.Sprintf("got %dx%d %v, expected %dx%d %s", rows.N, rows.Width, rows.Dtype, *want.Rows, want.Width,
			want.Dtype)
	}
	if detail := differs("row bytes", hex.EncodeToString(rows.Data), want.DataHex); detail != "" {
		return detail
	}
	var values bytes.Buffer
	if rows.Dtype == posenc.Float64 {
		binary.Write(&values, binary.LittleEndian, rows.Float64s())
	} else {
		decoded, err := rows.Float32s()
		if err != nil {
			return err.Error()
		}
		binary.Write(&values, binary.LittleEndian, decoded)
	}
	return differs("decoded values", hex.EncodeToString(values.Bytes()), want.ValuesHex)
}

func compareTable(info *posenc.TableInfo, want *expectation) string {
	w := want.Table
	got := fmt.Sprint(info.Name, info.Dtype, info.Computed, info.Rows, info.Width, info.Start, info.Stop, info.SpecHash)
	expected := fmt.Sprint(w.Name, w.Dtype, w.Computed, w.Rows, w.Width, w.Start, w.Stop, w.SpecHash)
	if info.ID < 1 || info.Generation < 1 {
		return fmt.Sprintf("id %d, generation %d", info.ID, info.Generation)
	}
	return differs("table", got, expected)
}

func compareListing(tables []posenc.ListedTable, want *expectation) string {
	if len(tables) != len(want.Tables) {
		return fmt.Sprintf("%d tables listed, expected %d", len(tables), len(want.Tables))
	}
	for i, w := range want.Tables {
		t := tables[i]
		switch {
		case t.Name != w.Name:
			return fmt.Sprintf("entry %d is %q, expected %q", i, t.Name, w.Name)
		case w.Computed != nil && (t.Error != "" || t.Computed != *w.Computed || t.ID < 1):
			return fmt.Sprintf("entry %q: %+v", t.Name, t)
		case w.Computed == nil && !strings.Contains(t.Error, w.ErrorContains):
			return fmt.Sprintf("entry %q: error %q lacks %q", t.Name, t.Error, w.ErrorContains)
		}
	}
	return ""
}

// compareSubset says whether the JSON object got holds the keys of want with their values (nested
// objects: the keys they list), numbers compared as written.
func compareSubset(got, want json.RawMessage) string {
	var g, w any
	for _, pair := range []struct {
		raw  json.RawMessage
		into *any
	}{{got, &g}, {want, &w}} {
		decoder := json.NewDecoder(bytes.NewReader(pair.raw))
		decoder.UseNumber()
		if err := decoder.Decode(pair.into); err != nil {
			return err.Error()
		}
	}
	if !holds(g, w) {
		return fmt.Sprintf("%s does not hold %s", got, want)
	}
	return ""
}

func holds(got, want any) bool {
	wantObject, isObject := want.(map[string]any)
	if !isObject {
		return reflect.DeepEqual(got, want)
	}
	gotObject, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for key, value := range wantObject {
		if !holds(gotObject[key], value) {
			return false
		}
	}
	return true
}

func differs(what, got, want string) string {
	if got == want {
		return ""
	}
	if len(got) > 80 {
		got = got[:80] + "..."
	}
	return fmt.Sprintf("%s differ: got %s", what, got)
}

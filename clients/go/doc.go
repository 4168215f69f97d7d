// Package posenc is a client of the posenc binary protocol (docs/protocol.md): exact positional
// encodings (sinusoidal tables, RoPE cos/sin caches, named computed encodings of any position) from a
// posenc-server, at a 32-byte header and 8 bytes a position per request.
//
//	client, err := posenc.NewClient("127.0.0.1:8001", nil) // a pool, safe for concurrent use
//	rows, err := client.Encode(ctx, "sin128-any", posenc.Int64s{1_700_000_000_123}, posenc.Float32)
//	values, err := rows.Float32s() // [rows.N * rows.Width]
//
// Errors: *ServerError (the server's status, field and message), *ArgumentError (refused before
// sending), *ConnError (the connection ended before the reply), or the context's error. The
// shared-memory tables are read, with no request at all, by the subpackage posenc.dev/posenc/shm.
// Standard library only; Go 1.19.
package posenc

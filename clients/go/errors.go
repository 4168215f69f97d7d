package posenc

import (
	"errors"
	"fmt"
	"strings"
)

// ServerError is an error reply: the server's status, and the field and message of its
// "field: message" text. Errors that close (Closes) end the connection; the others answer one request.
type ServerError struct {
	Status    Status
	Field     string
	Message   string
	Opcode    Opcode // the request's opcode (0 for the errors that close)
	RequestID uint64 // the request's id (0 for the errors that close)
}

func newServerError(h replyHeader, text string) *ServerError {
	field, message, found := strings.Cut(text, ": ")
	if !found {
		field, message = "request", text
	}
	return &ServerError{Status: h.status, Field: field, Message: message, Opcode: h.opcode, RequestID: h.requestID}
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("posenc: %v: %s: %s", e.Status, e.Field, e.Message)
}

// Closes says whether the server closed the connection after this error.
func (e *ServerError) Closes() bool { return e.Status.Closes() }

// ArgumentError is input refused before anything was sent: a table name that is not one, an unknown
// dtype, more positions than a frame holds, an inline spec whose fields disagree.
type ArgumentError struct {
	Field   string
	Message string
}

func argError(field, format string, args ...any) *ArgumentError {
	return &ArgumentError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func (e *ArgumentError) Error() string { return "posenc: " + e.Field + ": " + e.Message }

// ConnError says the connection ended or failed before the call's reply arrived, so the call may or
// may not have run. Err is io.EOF when the server ended the stream cleanly (a drain at SIGTERM, an idle
// close), the *ServerError that closed it (IDLE_TIMEOUT, SHUTTING_DOWN, ...), or the network error.
// Every operation only reads, so a Client sends such a call once more on a new connection.
type ConnError struct {
	Err error
}

func (e *ConnError) Error() string {
	return "posenc: the connection ended before the reply: " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

// ErrClosed is returned by calls on a Client or Conn that was closed.
var ErrClosed = errors.New("posenc: closed")

"""The HTTP transport: framing, head/body deadlines and size limits, write coalescing, connection
state (keep-alive, half-close, lingering close) and responses in request order. posenc's own
uvicorn protocol class (protocol.py); it hands complete requests to the pipeline."""

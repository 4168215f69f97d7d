"""The FastAPI app's side: routes, request schemas, OpenAPI, the error body, codecs and response
encoding. Everything a plan answers is answered here too, with the same bytes."""

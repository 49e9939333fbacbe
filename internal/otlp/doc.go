// Package otlp exports trace spans over OTLP/HTTP with protobuf encoding
// (the OpenTelemetry protocol's `http/protobuf`), as an
// sdktrace.SpanExporter.
//
// It exists so the program does not link the gRPC stack: the upstream
// OTLP/HTTP exporter imports the collector's generated service package,
// which brings gRPC and its gateway (about 110 packages; measured, they
// cost 1.5 MiB of resident memory at idle and 2 MiB at peak). The wire
// format is the protocol's own: the spans are the upstream protobuf
// messages, marshalled by the protobuf library, framed as an
// ExportTraceServiceRequest here.
//
// Behaviour follows the protocol's specification for OTLP/HTTP: POST to
// the traces URL with Content-Type application/x-protobuf, optional gzip,
// retry on 429, 502, 503 and 504 (honouring Retry-After) and on network
// errors with exponential back-off until the export's timeout, no retry
// on other statuses, partial success reported as an error.
package otlp

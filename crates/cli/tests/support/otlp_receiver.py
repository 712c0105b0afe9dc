"""An OTLP trace receiver for tests, built on OpenTelemetry's own protocol definitions
(PyPI's opentelemetry-proto): over gRPC (the TraceService) or over HTTP/protobuf
(POST /v1/traces). Each span received is appended to OUT as one JSON line; the port it
listens on is written to PORT_FILE once it listens.

usage: otlp_receiver.py grpc|http PORT_FILE OUT
"""

import json
import os
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

LOCK = threading.Lock()


def any_value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(v, kind))
    return getattr(v, kind)


def record(request, out_path):
    """Appends each span of an ExportTraceServiceRequest to the output file."""
    lines = []
    for resource_spans in request.resource_spans:
        resource = {a.key: any_value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                lines.append(json.dumps({
                    "traceId": span.trace_id.hex(),
                    "spanId": span.span_id.hex(),
                    "parentSpanId": span.parent_span_id.hex(),
                    "name": span.name,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {a.key: any_value(a.value) for a in span.attributes},
                    "events": [
                        {"name": e.name, "attributes": {a.key: any_value(a.value) for a in e.attributes}}
                        for e in span.events
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                    "scope": scope_spans.scope.name,
                    "resource": resource,
                }))
    with LOCK:
        with open(out_path, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, out_path):
        self.out_path = out_path

    def Export(self, request, context):
        record(request, self.out_path)
        return trace_service_pb2.ExportTraceServiceResponse()


def announce(port, port_file):
    tmp = port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(tmp, port_file)


def serve_grpc(port_file, out_path):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(out_path), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    announce(port, port_file)
    server.wait_for_termination()


def serve_http(port_file, out_path):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            record(request, out_path)
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    announce(server.server_address[1], port_file)
    server.serve_forever()


if __name__ == "__main__":
    protocol, port_file, out_path = sys.argv[1:4]
    if protocol == "grpc":
        serve_grpc(port_file, out_path)
    elif protocol == "http":
        serve_http(port_file, out_path)
    else:
        sys.exit(f"unknown protocol {protocol!r}: grpc or http")

//! Where and how traces go: the collector's address, the protocol, the queue's bound,
//! from the standard `OTEL_*` variables or set by hand.

use std::env;
use std::str::FromStr;
use std::time::Duration;

use crate::OtlpError;

/// How traces travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP over gRPC (a collector's port 4317).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (a collector's port 4318), OpenTelemetry's default.
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The protocol's name in `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

impl FromStr for OtlpProtocol {
    type Err = OtlpError;

    fn from_str(value: &str) -> Result<OtlpProtocol, OtlpError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "grpc" => Ok(OtlpProtocol::Grpc),
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            _ => Err(OtlpError::Config(format!(
                "OTLP protocol {value:?} is not `grpc` or `http/protobuf`"
            ))),
        }
    }
}

/// The exporter's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's base address (`http://host:4317`, `http://host:4318`); `None`: the
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` variables, else
    /// OpenTelemetry's default for the protocol.
    pub endpoint: Option<String>,
    /// The protocol.
    pub protocol: OtlpProtocol,
    /// The most spans waiting to be sent; a query whose spans do not fit is dropped (and
    /// counted), never waited for.
    pub queue_spans: usize,
    /// The most spans sent in one request.
    pub batch_spans: usize,
    /// How long shutting down waits for the queue to drain.
    pub shutdown_timeout: Duration,
}

/// Default [`OtlpConfig::queue_spans`].
pub const DEFAULT_QUEUE_SPANS: usize = 65_536;
/// Default [`OtlpConfig::batch_spans`].
pub const DEFAULT_BATCH_SPANS: usize = 2_048;
/// Default [`OtlpConfig::shutdown_timeout`].
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for OtlpConfig {
    fn default() -> OtlpConfig {
        OtlpConfig {
            endpoint: None,
            protocol: OtlpProtocol::HttpProtobuf,
            queue_spans: DEFAULT_QUEUE_SPANS,
            batch_spans: DEFAULT_BATCH_SPANS,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

impl OtlpConfig {
    /// The settings OpenTelemetry's variables give: the protocol from
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL` (default
    /// `http/protobuf`); the endpoint, headers and timeout are read by the exporter itself.
    ///
    /// # Errors
    /// A protocol other than `grpc` or `http/protobuf`.
    pub fn from_env() -> Result<OtlpConfig, OtlpError> {
        let protocol = [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .iter()
        .find_map(|name| env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(OtlpProtocol::HttpProtobuf);
        Ok(OtlpConfig {
            protocol,
            ..OtlpConfig::default()
        })
    }

    /// These settings sending to `endpoint`, a collector's base address.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> OtlpConfig {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// These settings with `protocol`.
    pub fn with_protocol(mut self, protocol: OtlpProtocol) -> OtlpConfig {
        self.protocol = protocol;
        self
    }

    /// The address the exporter is given: the base address checked, and for HTTP the
    /// traces path added to a base address without a path (as for
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub(crate) fn exporter_endpoint(&self) -> Result<Option<String>, OtlpError> {
        let Some(endpoint) = self.endpoint.as_deref().map(str::trim) else {
            return Ok(None);
        };
        let rest = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"))
            .filter(|rest| !rest.is_empty() && !rest.starts_with('/'))
            .ok_or_else(|| {
                OtlpError::Config(format!(
                    "OTLP endpoint {endpoint:?} is not an http:// or https:// address"
                ))
            })?;
        let has_path = rest.find('/').is_some_and(|i| rest.len() > i + 1);
        Ok(Some(match self.protocol {
            OtlpProtocol::HttpProtobuf if !has_path => {
                format!("{}/v1/traces", endpoint.trim_end_matches('/'))
            }
            _ => endpoint.to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_by_their_standard_names() {
        assert_eq!("grpc".parse::<OtlpProtocol>().unwrap(), OtlpProtocol::Grpc);
        assert_eq!(
            "HTTP/protobuf".parse::<OtlpProtocol>().unwrap(),
            OtlpProtocol::HttpProtobuf
        );
        let error = "http/json".parse::<OtlpProtocol>().unwrap_err();
        assert!(error.to_string().contains("http/json"), "{error}");
    }

    #[test]
    fn an_http_base_address_gets_the_traces_path() {
        let http = OtlpConfig::default().with_endpoint("http://localhost:4318");
        assert_eq!(
            http.exporter_endpoint().unwrap().as_deref(),
            Some("http://localhost:4318/v1/traces")
        );
        let with_path = OtlpConfig::default().with_endpoint("http://collector/otlp/v1/traces");
        assert_eq!(
            with_path.exporter_endpoint().unwrap().as_deref(),
            Some("http://collector/otlp/v1/traces")
        );
        let grpc = OtlpConfig::default()
            .with_protocol(OtlpProtocol::Grpc)
            .with_endpoint("http://localhost:4317");
        assert_eq!(
            grpc.exporter_endpoint().unwrap().as_deref(),
            Some("http://localhost:4317")
        );
        assert_eq!(OtlpConfig::default().exporter_endpoint().unwrap(), None);
        for bad in ["localhost:4317", "ftp://x", "http://", "http:///v1"] {
            let error = OtlpConfig::default()
                .with_endpoint(bad)
                .exporter_endpoint()
                .unwrap_err();
            assert!(error.to_string().contains("not an http"), "{bad}: {error}");
        }
    }
}

//! An OTLP receiver for tests: `tests/support/otlp_receiver.py`, built on OpenTelemetry's
//! own protocol definitions (opentelemetry-proto and grpcio, from the virtualenv that
//! `scripts/install-test-deps.sh` makes), writing each span it receives as a JSON line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A receiver running as a child process; killed when dropped.
pub(crate) struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    /// Starts a receiver of `protocol` (`grpc` or `http`) writing spans under `dir`, and
    /// waits (with a deadline) until it listens.
    pub(crate) fn start(protocol: &str, dir: &Path) -> Receiver {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = root.join("../../target/test-venv/bin/python");
        let port_file = dir.join(format!("{protocol}.port"));
        let out = dir.join(format!("{protocol}.jsonl"));
        let child = Command::new(&python)
            .arg(root.join("tests/support/otlp_receiver.py"))
            .arg(protocol)
            .arg(&port_file)
            .arg(&out)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} (scripts/install-test-deps.sh installs it): {e}",
                    python.display()
                )
            });
        let mut receiver = Receiver {
            child,
            port: 0,
            out,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while receiver.port == 0 {
            if let Some(status) = receiver.child.try_wait().unwrap() {
                panic!("the {protocol} receiver exited: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "the {protocol} receiver never listened"
            );
            match std::fs::read_to_string(&port_file) {
                Ok(port) => receiver.port = port.trim().parse().unwrap(),
                Err(_) => std::thread::park_timeout(Duration::from_millis(20)),
            }
        }
        receiver
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

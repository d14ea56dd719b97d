//! Logs: `tracing` with an env-filter level and text or JSON output. Each
//! reconcile runs in a span carrying the object (`namespace/name`), and
//! instance and VMID fields where known, so every line can be attributed.
//!
//! Never log credential values: the types that hold them (`pve_client::Secret`,
//! `Auth`) print `***`, and the controller never formats a Secret's data.

use std::io::Write;

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line: event fields flattened, the innermost span
    /// as `span` and every enclosing span (reconcile → probe) in `spans`.
    Json,
}

/// Builds the subscriber: `level` is an env-filter directive (`info`,
/// `capmox_controller=debug,kube=warn`, …); an invalid directive falls back to `info`.
pub fn subscriber<W>(format: LogFormat, level: &str, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    // A log line that cannot be written (stderr closed: `… 2>&1 | head`) is
    // dropped. tracing-subscriber would report it with `eprintln!`, which
    // panics on the same closed stderr and ends the process with status 101.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true)
        .log_internal_errors(false);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(false).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(true)
                .finish(),
        ),
    }
}

/// Installs the global subscriber writing to stderr.
///
/// # Errors
/// When a global subscriber is already installed.
pub fn init(
    format: LogFormat,
    level: &str,
) -> Result<(), tracing::subscriber::SetGlobalDefaultError> {
    tracing::subscriber::set_global_default(subscriber(format, level, std::io::stderr))
}

/// A writer that appends to a shared buffer (tests capture logs with it).
#[derive(Clone, Debug, Default)]
pub struct BufferWriter(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl BufferWriter {
    /// Everything written so far, as text.
    pub fn contents(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

impl Write for BufferWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BufferWriter {
    type Writer = BufferWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_span_fields() {
        let buf = BufferWriter::default();
        let sub = subscriber(LogFormat::Json, "debug", buf.clone());
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!("reconcile", object = "ns1/wl1", instance = "dc-a");
            let _g = span.enter();
            tracing::info!(vmid = 105, "cloned");
        });
        let out = buf.contents();
        let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(line["message"], "cloned");
        assert_eq!(line["vmid"], 105);
        assert_eq!(line["span"]["object"], "ns1/wl1");
        assert_eq!(line["span"]["instance"], "dc-a");
        assert_eq!(line["spans"][0]["name"], "reconcile");
        assert_eq!(line["level"], "INFO");
    }

    #[test]
    fn text_lines_and_bad_level_fallback() {
        let buf = BufferWriter::default();
        let sub = subscriber(LogFormat::Text, "not a [valid directive", buf.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::debug!("hidden");
            tracing::info!(instance = "dc-b", "probed");
        });
        let out = buf.contents();
        assert!(!out.contains("hidden"), "{out}");
        assert!(out.contains("probed instance=\"dc-b\""), "{out}");
    }
}

//! The log file's layer: an event is taken apart on the thread that logged
//! it (its time, level, target, the spans it is in and its fields, as plain
//! values) and formatted into its line by the writer thread.
//!
//! Formatting a line (the date, the padding, quoting strings, numbers to
//! text) is most of what a log line costs; done by the writer, it stays off
//! the turn, so a session with a log file at the default level runs as fast
//! as one without. The line reads as `tracing-subscriber`'s full format:
//!
//! ```text
//! 2026-11-27T12:00:00.123456Z  INFO turn{model="m"}: capstan::agent::turn: turn done requests=1
//! ```

use std::fmt::Write as _;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record as SpanValues};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::file::FileSink;

/// One event, as taken on the thread that logged it.
pub struct Record {
    time: SystemTime,
    level: Level,
    target: &'static str,
    /// The spans the event is in, formatted (`a{x=1}:b{}:`), or empty.
    scope: String,
    message: String,
    fields: Vec<(&'static str, Value)>,
}

/// A field's value: numbers and flags as they are, text copied.
enum Value {
    /// Text recorded as a string: quoted in the line.
    Str(String),
    /// Text a `Debug` or `Display` implementation wrote: as written.
    Formatted(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl Record {
    /// The line, ending in a newline.
    pub fn into_line(self) -> Vec<u8> {
        let mut line = crate::timestamp::rfc3339_micros(self.time);
        let _ = write!(line, " {:>5} ", self.level.as_str());
        if !self.scope.is_empty() {
            line.push_str(&self.scope);
            line.push(' ');
        }
        line.push_str(self.target);
        line.push_str(": ");
        line.push_str(&self.message);
        for (name, value) in &self.fields {
            if !line.ends_with(' ') {
                line.push(' ');
            }
            line.push_str(name);
            line.push('=');
            let _ = match value {
                Value::Str(text) => write!(line, "{text:?}"),
                Value::Formatted(text) => write!(line, "{text}"),
                Value::U64(n) => write!(line, "{n}"),
                Value::I64(n) => write!(line, "{n}"),
                Value::F64(n) => write!(line, "{n}"),
                Value::Bool(b) => write!(line, "{b}"),
            };
        }
        line.push('\n');
        line.into_bytes()
    }
}

/// Collects an event's fields (and its message) into a [`Record`].
struct Taker<'a> {
    message: &'a mut String,
    fields: &'a mut Vec<(&'static str, Value)>,
}

impl Taker<'_> {
    fn take(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            match value {
                Value::Str(text) | Value::Formatted(text) => *self.message = text,
                _ => {}
            }
        } else {
            self.fields.push((field.name(), value));
        }
    }
}

impl Visit for Taker<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.take(field, Value::Formatted(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.take(field, Value::Str(value.to_string()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.take(field, Value::U64(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.take(field, Value::I64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.take(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.take(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.take(field, Value::Formatted(value.to_string()));
    }
}

/// A span's fields, formatted once when it is made (spans are logged at
/// `debug` and below, where the cost of a line matters less).
struct SpanFields(String);

/// Formats fields as `name=value` separated by spaces.
struct Formatter<'a>(&'a mut String);

impl Formatter<'_> {
    fn separate(&mut self, field: &Field) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        self.0.push_str(field.name());
        self.0.push('=');
    }
}

impl Visit for Formatter<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.separate(field);
        let _ = write!(self.0, "{value:?}");
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.separate(field);
        let _ = write!(self.0, "{value:?}");
    }
}

/// The layer that sends records to the log file's writer.
pub struct FileLayer {
    sink: FileSink,
}

impl FileLayer {
    /// A layer writing to `sink`.
    pub fn new(sink: FileSink) -> Self {
        Self { sink }
    }
}

impl<S> Layer<S> for FileLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = String::new();
        attrs.record(&mut Formatter(&mut fields));
        span.extensions_mut().insert(SpanFields(fields));
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(SpanFields(fields)) = extensions.get_mut::<SpanFields>() {
            values.record(&mut Formatter(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let time = SystemTime::now();
        let meta = event.metadata();
        let mut scope = String::new();
        if let Some(spans) = ctx.event_scope(event) {
            for span in spans.from_root() {
                scope.push_str(span.name());
                if let Some(SpanFields(fields)) = span.extensions().get::<SpanFields>()
                    && !fields.is_empty()
                {
                    scope.push('{');
                    scope.push_str(fields);
                    scope.push('}');
                }
                scope.push(':');
            }
        }
        let mut message = String::new();
        let mut fields = Vec::with_capacity(meta.fields().len());
        event.record(&mut Taker {
            message: &mut message,
            fields: &mut fields,
        });
        self.sink.send_record(Record {
            time,
            level: *meta.level(),
            target: meta.target(),
            scope,
            message,
            fields,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_record_reads_as_the_full_format() {
        let record = Record {
            time: SystemTime::UNIX_EPOCH + Duration::from_micros(1_795_341_601_000_042),
            level: Level::INFO,
            target: "capstan::agent::turn",
            scope: "turn{model=\"m\"}:".into(),
            message: "turn done".into(),
            fields: vec![
                ("session", Value::Str("a \"b\"".into())),
                ("end", Value::Formatted("Finished(EndTurn)".into())),
                ("requests", Value::U64(2)),
                ("delta", Value::I64(-1)),
                ("ok", Value::Bool(true)),
                ("share", Value::F64(0.5)),
            ],
        };
        let line = String::from_utf8(record.into_line()).unwrap();
        assert_eq!(
            line,
            "2026-11-22T10:00:01.000042Z  INFO turn{model=\"m\"}: capstan::agent::turn: turn done \
             session=\"a \\\"b\\\"\" end=Finished(EndTurn) requests=2 delta=-1 ok=true share=0.5\n"
        );
    }

    #[test]
    fn events_and_spans_reach_the_file_formatted_by_the_writer() {
        use tracing_subscriber::layer::SubscriberExt;
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::start(
            dir.path().to_path_buf(),
            super::super::file::Fallback("x.log".into()),
        )
        .unwrap();
        sink.open(dir.path().join("t.log"));
        let subscriber = tracing_subscriber::Registry::default().with(FileLayer::new(sink.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("call", plugin = "fs", n = 3u64);
            let _entered = span.enter();
            span.record("n", 4u64);
            tracing::warn!(code = 7i64, why = %"no such file", "read failed");
        });
        sink.flush();
        let text = std::fs::read_to_string(dir.path().join("t.log")).unwrap();
        let line = text.lines().next().unwrap();
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(time.ends_with('Z') && time.len() == 27, "{time}");
        assert_eq!(
            rest,
            " WARN call{plugin=\"fs\" n=3 n=4}: capstan::logging::record::tests: read failed \
             code=7 why=no such file"
        );
    }
}

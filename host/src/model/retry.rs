//! When and how long to wait before trying a model request again.
//!
//! Both HTTP providers run each request through [`stream_with_retries`]:
//! connection failures, 408/409/429/5xx/529, `overloaded_error`, a server
//! that never starts its response and broken streams are retried with exponential backoff and full jitter, or after
//! the `retry-after` the provider asked for. A failure is only retried while
//! nothing of the answer has reached the caller's sink: text already shown
//! to the user cannot be unsaid.
//!
//! Every request passes here, so here the conversation is checked against
//! the rules the APIs hold it to ([`super::conversation`]) and repaired
//! before it is sent if it breaks one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{EventSink, ModelError, ModelFuture, Request, Response, StreamEvent, conversation};

/// Waits for a given time; tests replace it to record the waits instead.
pub type SleepFn = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How long a server may take to start its response unless the config
/// says otherwise: long enough for a local server to load a model or read a
/// long prompt before it answers.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(300);

/// How failed requests are retried and how long a silent stream is allowed.
#[derive(Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The backoff before the first retry (before jitter).
    pub base_delay: Duration,
    /// The longest backoff (before jitter).
    pub max_delay: Duration,
    /// The longest `retry-after` honoured; longer requests wait this long.
    pub max_retry_after: Duration,
    /// How long the server may take to start its response (its status and
    /// headers) once the request is sent.
    pub response_timeout: Duration,
    /// How long a response may send no bytes before it counts as broken.
    pub idle_timeout: Duration,
    /// How waiting is done.
    pub sleep: SleepFn,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            idle_timeout: Duration::from_secs(90),
            sleep: Arc::new(|duration| Box::pin(tokio::time::sleep(duration))),
        }
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("max_retry_after", &self.max_retry_after)
            .field("response_timeout", &self.response_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// How long to wait before retry number `retry` (0 for the first) after
    /// `error`: the provider's `retry-after` if it gave one (capped at
    /// `max_retry_after`), else a random time up to the exponential backoff.
    pub fn delay_before(&self, retry: u32, error: &ModelError) -> Duration {
        if let Some(asked) = error.retry_after() {
            return asked.min(self.max_retry_after);
        }
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        let ceiling = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let ceiling_nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=ceiling_nanos))
    }
}

/// One try at a request, as a provider makes it.
pub trait Attempt: Sync {
    /// Sends the request once and streams the answer to `events`.
    fn attempt<'a>(&'a self, request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a>;
}

/// Runs `provider`'s attempts until one succeeds, the error is not worth
/// retrying, part of the answer was already delivered, or the retries run
/// out; reports each retry as [`StreamEvent::Retrying`]. A conversation
/// the APIs would reject is repaired first.
pub async fn stream_with_retries<P: Attempt>(
    policy: &RetryPolicy,
    provider: &P,
    request: &Request,
    events: EventSink<'_>,
) -> Result<Response, ModelError> {
    let repaired_request;
    let request = match conversation::repaired(&request.messages) {
        None => request,
        Some(conversation::Repaired {
            problem,
            messages,
            repairs,
        }) => {
            let repairs: Vec<String> = repairs.iter().map(ToString::to_string).collect();
            tracing::warn!(
                problem = problem.as_str(),
                repairs = repairs.join("; ").as_str(),
                "the conversation broke a rule of the model APIs; repaired before sending"
            );
            repaired_request = Request {
                messages,
                ..request.clone()
            };
            &repaired_request
        }
    };
    let mut retry = 0;
    loop {
        let mut delivered = false;
        let result = {
            let mut tracking = |event: StreamEvent| {
                delivered = true;
                events(event);
            };
            provider.attempt(request, &mut tracking).await
        };
        let error = match result {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        if delivered || !error.is_retryable() || retry >= policy.max_retries {
            return Err(error);
        }
        let after = policy.delay_before(retry, &error);
        events(StreamEvent::Retrying {
            attempt: retry + 2,
            after,
            reason: error.to_string(),
        });
        (policy.sleep)(after).await;
        retry += 1;
    }
}

/// Reads a `retry-after` header value: whole seconds, or an HTTP date
/// (a date in the past means "now").
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StopReason, Usage};
    use std::sync::Mutex;

    fn overloaded(retry_after: Option<Duration>) -> ModelError {
        ModelError::Overloaded {
            provider: "test".into(),
            retry_after,
            message: "busy".into(),
        }
    }

    fn recording_policy(waits: Arc<Mutex<Vec<Duration>>>) -> RetryPolicy {
        RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            sleep: Arc::new(move |duration| {
                waits.lock().unwrap().push(duration);
                Box::pin(async {})
            }),
            ..RetryPolicy::default()
        }
    }

    /// Fails with the scripted errors in order, then answers.
    struct ScriptedFailures {
        failures: Mutex<Vec<(ModelError, bool)>>,
    }

    impl Attempt for ScriptedFailures {
        fn attempt<'a>(&'a self, _request: &'a Request, events: EventSink<'a>) -> ModelFuture<'a> {
            Box::pin(async move {
                let next = self.failures.lock().unwrap().pop();
                match next {
                    Some((error, deliver_first)) => {
                        if deliver_first {
                            events(StreamEvent::TextDelta("partial".into()));
                        }
                        Err(error)
                    }
                    None => Ok(Response {
                        content: Vec::new(),
                        stop_reason: StopReason::EndTurn,
                        usage: Usage::default(),
                    }),
                }
            })
        }
    }

    fn request() -> Request {
        Request {
            model: "m".into(),
            system: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            max_tokens: 10,
            summary: false,
        }
    }

    async fn run(
        failures: Vec<(ModelError, bool)>,
    ) -> (
        Result<Response, ModelError>,
        Vec<StreamEvent>,
        Vec<Duration>,
    ) {
        let waits = Arc::new(Mutex::new(Vec::new()));
        let policy = recording_policy(waits.clone());
        let provider = ScriptedFailures {
            failures: Mutex::new(failures.into_iter().rev().collect()),
        };
        let mut seen = Vec::new();
        let result = stream_with_retries(&policy, &provider, &request(), &mut |event| {
            seen.push(event)
        })
        .await;
        let waits = waits.lock().unwrap().clone();
        (result, seen, waits)
    }

    #[test]
    fn backoff_stays_under_the_exponential_ceiling() {
        let policy = recording_policy(Arc::new(Mutex::new(Vec::new())));
        for retry in 0..40 {
            let ceiling =
                Duration::from_millis(10 * (1u64 << retry.min(2))).min(Duration::from_millis(40));
            for _ in 0..50 {
                assert!(policy.delay_before(retry, &overloaded(None)) <= ceiling);
            }
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay_before(0, &overloaded(Some(Duration::from_secs(7)))),
            Duration::from_secs(7)
        );
        assert_eq!(
            policy.delay_before(0, &overloaded(Some(Duration::from_secs(3600)))),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn retry_after_values() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(parse_retry_after("12", now), Some(Duration::from_secs(12)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[tokio::test]
    async fn retries_then_succeeds_reporting_each_retry() {
        let (result, seen, waits) = run(vec![
            (overloaded(Some(Duration::from_secs(2))), false),
            (overloaded(None), false),
        ])
        .await;
        assert!(result.is_ok());
        assert_eq!(waits.len(), 2);
        assert_eq!(waits[0], Duration::from_secs(2));
        assert!(waits[1] <= Duration::from_millis(20));
        let attempts: Vec<u32> = seen
            .iter()
            .map(|event| match event {
                StreamEvent::Retrying { attempt, .. } => *attempt,
                other => panic!("unexpected event {other:?}"),
            })
            .collect();
        assert_eq!(attempts, vec![2, 3]);
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let (result, _, waits) = run(vec![
            (overloaded(None), false),
            (overloaded(None), false),
            (overloaded(None), false),
        ])
        .await;
        assert!(matches!(result, Err(ModelError::Overloaded { .. })));
        assert_eq!(waits.len(), 2);
    }

    #[tokio::test]
    async fn does_not_retry_after_delivering_part_of_the_answer() {
        let (result, seen, waits) = run(vec![(overloaded(None), true)]).await;
        assert!(matches!(result, Err(ModelError::Overloaded { .. })));
        assert!(waits.is_empty());
        assert_eq!(seen, vec![StreamEvent::TextDelta("partial".into())]);
    }

    #[tokio::test]
    async fn does_not_retry_errors_that_would_repeat() {
        let auth = ModelError::Auth {
            provider: "test".into(),
            status: 401,
            message: "bad key".into(),
            key_var: "KEY".into(),
        };
        let (result, seen, waits) = run(vec![(auth.clone(), false)]).await;
        assert_eq!(result, Err(auth));
        assert!(waits.is_empty());
        assert!(seen.is_empty());
    }

    /// Records the messages of every request it is sent.
    struct RecordingAttempt {
        sent: Mutex<Vec<Vec<crate::model::Message>>>,
    }

    impl Attempt for RecordingAttempt {
        fn attempt<'a>(&'a self, request: &'a Request, _events: EventSink<'a>) -> ModelFuture<'a> {
            self.sent.lock().unwrap().push(request.messages.clone());
            Box::pin(async {
                Ok(Response {
                    content: Vec::new(),
                    stop_reason: StopReason::EndTurn,
                    usage: Usage::default(),
                })
            })
        }
    }

    #[tokio::test]
    async fn a_conversation_the_apis_would_reject_is_repaired_before_it_is_sent() {
        use crate::model::{Block, Message, Role};
        let call = |id: &str| Block::ToolUse {
            id: id.into(),
            name: "read".into(),
            input: serde_json::json!({}),
        };
        let broken = vec![
            Message {
                role: Role::Assistant,
                content: vec![call("a"), call("a")],
            },
            Message {
                role: Role::User,
                content: vec![Block::Text { text: "go".into() }],
            },
        ];
        let provider = RecordingAttempt {
            sent: Mutex::new(Vec::new()),
        };
        let policy = recording_policy(Arc::new(Mutex::new(Vec::new())));
        for messages in [broken.clone(), Vec::new()] {
            let request = Request {
                messages,
                ..request()
            };
            stream_with_retries(&policy, &provider, &request, &mut |_| {})
                .await
                .unwrap();
        }
        let sent = provider.sent.lock().unwrap();
        assert!(conversation::check(&broken).is_err());
        assert_eq!(conversation::check(&sent[0]), Ok(()), "{:#?}", sent[0]);
        assert_eq!(sent[0][0].role, Role::User);
        // A valid conversation goes as it is.
        assert!(sent[1].is_empty());
    }
}

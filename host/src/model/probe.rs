//! Whether a model server answers at all: one GET of its base URL, with a
//! short timeout and no key, for `capstan doctor`.

use std::time::{Duration, Instant};

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The server answered with this HTTP status, after this long.
    Answered {
        /// The status.
        status: u16,
        /// How long it took.
        elapsed: Duration,
    },
    /// It could not be reached: why.
    Unreachable(String),
}

/// Sends `GET url` (no credentials) and waits at most `timeout`. Any HTTP
/// answer counts as reachable: a base URL often answers 404 or 401.
pub async fn probe(url: &str, timeout: Duration) -> Reach {
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(error) => return Reach::Unreachable(format!("cannot set up an HTTP client: {error}")),
    };
    let started = Instant::now();
    match client.get(url).send().await {
        Ok(response) => Reach::Answered {
            status: response.status().as_u16(),
            elapsed: started.elapsed(),
        },
        Err(error) if error.is_timeout() => {
            Reach::Unreachable(format!("no answer within {} s", timeout.as_secs()))
        }
        Err(error) if error.is_connect() => {
            Reach::Unreachable(format!("cannot connect: {}", root_cause(&error)))
        }
        Err(error) => Reach::Unreachable(root_cause(&error)),
    }
}

/// The innermost error's text (reqwest's outer one only says "error
/// sending request").
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

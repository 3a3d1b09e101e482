//! The one retry layer under every API request.
//!
//! Retried: 429 and 5xx answers, and transport failures (refused or dropped connections,
//! timeouts). Each retry waits an exponentially growing, jittered delay (200 ms doubling, at
//! most 3 s), or the server's `Retry-After` when it names one; retrying stops after the
//! configured number of attempts or when the next wait would pass the time budget, and the
//! last answer is returned as it was, so errors report what the server actually said.
//! 409 is not retried here: a conflict needs the caller to read again before it writes.

use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use tokio::time::Instant;
use tower::BoxError;
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};

use super::Settings;

/// The kube client with the retry layer on top of kube's default stack.
pub(super) fn client(config: kube::Config, settings: &Settings) -> Result<kube::Client, kube::Error> {
    let policy = match settings.deadline {
        // The user gave the command a time: retries may use all of it.
        Some(d) => ApiRetry::until(Instant::from_std(d)),
        None => ApiRetry::new(settings.attempts, settings.timeout),
    };
    Ok(kube::client::ClientBuilder::try_from(config)?
        // Retry needs a cloneable service; the buffer makes kube's boxed stack one.
        .with_layer(&BufferLayer::new(64))
        .with_layer(&RetryLayer::new(policy))
        .build())
}

#[derive(Clone)]
pub(super) struct ApiRetry {
    attempts: u32,
    budget: Duration,
    /// Set at the first retry decision: the policy is cloned per request.
    deadline: Option<Instant>,
    /// The command's own deadline, which bounds every request's retries instead.
    until: Option<Instant>,
    done: u32,
    delay: Duration,
}

const FIRST_DELAY: Duration = Duration::from_millis(200);
/// Attempts at a request whose server error waiting does not cure, under a command deadline.
const PERSISTENT_ATTEMPTS: u32 = 4;
const MAX_DELAY: Duration = Duration::from_secs(3);

impl ApiRetry {
    pub(super) fn new(attempts: u32, budget: Duration) -> ApiRetry {
        ApiRetry {
            attempts: attempts.max(1),
            budget,
            deadline: None,
            until: None,
            done: 1,
            delay: FIRST_DELAY,
        }
    }

    /// Retries as long as the wait ends before `until`, however many attempts that is, for
    /// an answer that says "later" (429, 502, 503, 504, or no answer at all); another server
    /// error (a 500 from an admission webhook) is not cured by waiting, and gets the usual
    /// attempts.
    pub(super) fn until(until: Instant) -> ApiRetry {
        ApiRetry { until: Some(until), ..ApiRetry::new(u32::MAX, Duration::ZERO) }
    }

    /// The wait before the next attempt, or `None` to stop. `retry_after` is the server's;
    /// `code` its status (`None`: no answer, a transport failure).
    pub(super) fn next_wait(
        &mut self,
        now: Instant,
        retry_after: Option<Duration>,
        code: Option<u16>,
    ) -> Option<Duration> {
        let deadline = match self.until {
            Some(u) => u,
            None => *self.deadline.get_or_insert(now + self.budget),
        };
        let later = code.is_none_or(|c| matches!(c, 429 | 502 | 503 | 504));
        let attempts = if self.until.is_some() && !later { PERSISTENT_ATTEMPTS } else { self.attempts };
        if self.done >= attempts {
            return None;
        }
        let wait = match retry_after {
            Some(server) => server,
            None => jitter(self.delay),
        };
        if now + wait > deadline {
            return None;
        }
        self.done += 1;
        self.delay = (self.delay * 2).min(MAX_DELAY);
        Some(wait)
    }
}

/// Between half and all of `d`, so that clients failing together do not retry together.
pub fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};

    // Each RandomState has fresh keys: a cheap source of randomness, no crate needed.
    let frac = (std::collections::hash_map::RandomState::new().build_hasher().finish() % 1000) as u32;
    d / 2 + d / 2 * frac / 1000
}

pub(super) fn retryable_status(code: u16) -> bool {
    code == 429 || (500..=599).contains(&code)
}

/// `Retry-After` in seconds (the form the API server sends); HTTP dates are not used by it.
fn retry_after<B>(res: &Response<B>) -> Option<Duration> {
    let v = res.headers().get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for ApiRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let (server_wait, code) = match result {
            Ok(res) if retryable_status(res.status().as_u16()) => {
                (retry_after(res), Some(res.status().as_u16()))
            }
            Ok(_) => return None,
            Err(_) => (None, None),
        };
        let wait = self.next_wait(Instant::now(), server_wait, code)?;
        tracing::debug!(method = %req.method(), uri = %req.uri(), ?wait, attempt = self.done, "retrying");
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        let body = req.body().try_clone()?;
        let mut new =
            Request::builder().method(req.method().clone()).uri(req.uri().clone()).version(req.version());
        if let Some(h) = new.headers_mut() {
            h.extend(req.headers().clone());
        }
        new.body(body).ok().map(|mut r| {
            *r.extensions_mut() = req.extensions().clone();
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_and_budget_both_bound_the_retries() {
        let now = Instant::now();
        let mut p = ApiRetry::new(4, Duration::from_secs(60));
        let waits: Vec<_> = std::iter::from_fn(|| p.next_wait(now, None, Some(503))).collect();
        assert_eq!(waits.len(), 3, "four attempts in all");
        assert!(waits.iter().all(|w| *w <= MAX_DELAY && *w >= FIRST_DELAY / 2), "{waits:?}");

        let mut p = ApiRetry::new(10, Duration::from_secs(5));
        assert_eq!(p.next_wait(now, Some(Duration::from_secs(2)), Some(429)), Some(Duration::from_secs(2)));
        assert_eq!(p.next_wait(now, Some(Duration::from_secs(6)), Some(429)), None, "past the budget: stop");
    }

    #[test]
    fn a_command_deadline_bounds_the_retries_instead_of_attempts() {
        let now = Instant::now();
        let mut p = ApiRetry::until(now + Duration::from_secs(20));
        // 503s for a while: far more than four attempts, each wait ending before the deadline.
        let waits: Vec<_> = std::iter::from_fn(|| p.next_wait(now, None, Some(503))).take(50).collect();
        assert_eq!(waits.len(), 50, "retries go on while the command has time");
        // A 500 is not cured by waiting: four attempts, deadline or not.
        let mut p = ApiRetry::until(now + Duration::from_secs(20));
        assert_eq!(std::iter::from_fn(|| p.next_wait(now, None, Some(500))).take(50).count(), 3);
        let mut p = ApiRetry::until(now + Duration::from_secs(1));
        assert_eq!(
            p.next_wait(now, Some(Duration::from_secs(2)), Some(429)),
            None,
            "a wait past the deadline: stop"
        );
    }

    #[test]
    fn delays_grow_and_are_capped() {
        let now = Instant::now();
        let mut p = ApiRetry::new(20, Duration::from_secs(3600));
        let waits: Vec<_> = std::iter::from_fn(|| p.next_wait(now, None, Some(503))).collect();
        assert!(waits[3] > waits[0], "{waits:?}");
        assert!(waits.iter().all(|w| *w <= MAX_DELAY));
    }
}

//! The gateway's answers through the project's own client ([`lockgate::client`]), checked
//! in one place: a test says which answer it expects and gets the typed body, or the
//! problem, back; anything else fails with what came instead. The bodies are the server's
//! own types, so a test reads fields by name, and a field the server renames breaks the
//! build, not an assertion at run time.

use std::fmt::Debug;

use lockgate::client::{Answer, ClientError};
use lockgate::http::problem::Problem;

/// What a test expects of an answer.
pub trait Answered<T> {
    /// The body of a success with `status`.
    fn done(self, status: u16) -> T;
    /// The problem document of a refusal with `status` and kind `slug` (its `type`, `status`,
    /// `title` and `detail` checked as [`super::assert_problem`] checks them).
    fn refused(self, status: u16, slug: &str) -> Problem;
    /// The status answered.
    fn status(&self) -> u16;
}

impl<T: Debug> Answered<T> for Result<Answer<T>, ClientError> {
    fn done(self, expected: u16) -> T {
        match self {
            Ok(Answer::Done { status, body }) if status.as_u16() == expected => body,
            other => panic!("expected {expected}, got {other:?}"),
        }
    }

    fn refused(self, expected: u16, slug: &str) -> Problem {
        match self {
            Ok(Answer::Refused {
                status, problem, ..
            }) if status.as_u16() == expected => {
                assert_eq!(
                    problem.type_uri,
                    format!("https://lockgate.dev/problems/{slug}"),
                    "{problem:?}"
                );
                assert_eq!(problem.status, expected, "{problem:?}");
                assert!(
                    !problem.title.is_empty() && !problem.detail.is_empty(),
                    "{problem:?}"
                );
                *problem
            }
            other => panic!("expected a {expected} {slug}, got {other:?}"),
        }
    }

    fn status(&self) -> u16 {
        match self {
            Ok(answer) => answer.status().as_u16(),
            Err(err) => panic!("no answer: {err}"),
        }
    }
}

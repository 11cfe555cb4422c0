//! Scripts that requests send at about the same moment go to Redis in one write.
//!
//! redis-rs's multiplexed connection writes whatever its queue holds when its task runs. On a
//! busy gateway that task runs right after each request that wakes it (tokio runs a task just
//! woken next), so each command costs a write of its own: a system call, and a wake-up of
//! Redis to read it (measured: one write per two commands at 64 concurrent clients).
//!
//! Here a request's script joins a batch. The first of a batch spawns the batch's flush task,
//! which first yields once, so that the requests ready to run on this gateway get to add
//! theirs, then sends the whole batch as one pipeline (one write) and hands each request its
//! answer. The flush task, not the first request, sends and answers: a request whose client
//! hangs up, or whose timeout passes, does not take the others' answers with it. On an idle
//! gateway a batch is one script, sent after one yield.
//!
//! A batch is bounded as a whole: one timer per batch, where each script used to have its own;
//! a batch that gets no answer in time answers every script of it with a timeout.
//!
//! Only scripts on a single node's connection are batched: a Cluster pipeline would have to
//! stay within one slot, and native commands travel as pipelines of their own.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, RedisError, RedisResult, Value};
use tokio::sync::oneshot;

/// A script waiting in a batch, and where its answer goes.
type Waiting = (Cmd, oneshot::Sender<RedisResult<Value>>);

/// The batch being gathered, if a flush is scheduled.
#[derive(Debug, Default)]
pub struct Batcher {
    pending: Mutex<Option<Vec<Waiting>>>,
}

impl Batcher {
    /// Sends `cmd` in the next batch on `conn` and reads its answer, as `Cmd::query_async`;
    /// a batch with no answer within `timeout` answers [`Batcher::timed_out`] errors.
    pub async fn query<T, C>(
        self: &std::sync::Arc<Self>,
        conn: &C,
        cmd: &Cmd,
        timeout: Duration,
    ) -> RedisResult<T>
    where
        T: FromRedisValue,
        C: ConnectionLike + Clone + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let first = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            match pending.as_mut() {
                Some(batch) => {
                    batch.push((cmd.clone(), answer));
                    false
                }
                None => {
                    *pending = Some(vec![(cmd.clone(), answer)]);
                    true
                }
            }
        };
        if first {
            tokio::spawn(self.clone().flush(conn.clone(), timeout));
        }
        let value = answered.await.map_err(|_| {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the batch was dropped before its answer",
            ))
        })??;
        Ok(redis::from_redis_value(value.extract_error()?)?)
    }

    /// Whether `err` says a batch got no answer in time (the command may or may not have run).
    pub fn timed_out(err: &RedisError) -> bool {
        err.is_timeout()
    }

    /// Lets the ready requests join, then sends the batch and answers each of its requests.
    async fn flush<C: ConnectionLike + Send>(
        self: std::sync::Arc<Self>,
        mut conn: C,
        timeout: Duration,
    ) {
        tokio::task::yield_now().await;
        let batch = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.take().unwrap_or_default()
        };
        let mut pipe = redis::pipe();
        let mut answers = Vec::with_capacity(batch.len());
        // A request that gave up before its batch left (its client hung up) is not sent: as
        // redis-rs does for a command whose caller is gone. (An acquire's guard withdraws
        // whatever it may have been granted either way.)
        for (cmd, answer) in batch.into_iter().filter(|(_, answer)| !answer.is_closed()) {
            pipe.add_command(cmd);
            answers.push(answer);
        }
        if answers.is_empty() {
            return;
        }
        // One that gives up while the batch is out has dropped its receiver: nothing to tell.
        let sent = conn.req_packed_commands(&pipe, 0, answers.len());
        let answered = tokio::time::timeout(timeout, sent)
            .await
            .unwrap_or_else(|_| {
                Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer to the batch in time",
                )))
            });
        match answered {
            Ok(values) if values.len() == answers.len() => {
                for (answer, value) in answers.into_iter().zip(values) {
                    let _ = answer.send(Ok(value));
                }
            }
            Ok(values) => {
                let err = RedisError::from((
                    redis::ErrorKind::Parse,
                    "a batch got another number of answers than it sent commands",
                    format!("{} for {}", values.len(), answers.len()),
                ));
                for answer in answers {
                    let _ = answer.send(Err(err.clone()));
                }
            }
            Err(err) => {
                for answer in answers {
                    let _ = answer.send(Err(err.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::FutureExt;
    use redis::RedisFuture;

    use super::*;

    /// Answers each command of a pipeline with its first argument, after `delay`; counts the
    /// writes (pipelines) it was sent.
    #[derive(Clone, Default)]
    struct Echo {
        writes: Arc<AtomicUsize>,
        commands: Arc<AtomicUsize>,
        delay: Duration,
    }

    impl Echo {
        /// An echo that answers after `delay`.
        fn after(delay: Duration) -> Self {
            Self {
                delay,
                ..Self::default()
            }
        }
    }

    impl ConnectionLike for Echo {
        fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
            unreachable!("a batch is sent as a pipeline")
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            pipeline: &'a redis::Pipeline,
            _: usize,
            _: usize,
        ) -> RedisFuture<'a, Vec<Value>> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.commands
                .fetch_add(pipeline.cmd_iter().count(), Ordering::SeqCst);
            let answers = pipeline
                .cmd_iter()
                .map(|cmd| match cmd.args_iter().nth(1) {
                    Some(redis::Arg::Simple(arg)) => Value::BulkString(arg.to_vec()),
                    _ => Value::Nil,
                })
                .collect();
            let delay = self.delay;
            async move {
                tokio::time::sleep(delay).await;
                Ok(answers)
            }
            .boxed()
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    fn echo(n: usize) -> Cmd {
        let mut cmd = redis::cmd("ECHO");
        cmd.arg(n.to_string());
        cmd
    }

    /// A request for the echo of `n`, with a second to be answered, as a task of its own.
    fn spawn_echo(
        batcher: &Arc<Batcher>,
        conn: &Echo,
        n: usize,
    ) -> tokio::task::JoinHandle<RedisResult<String>> {
        let (batcher, conn) = (batcher.clone(), conn.clone());
        tokio::spawn(async move {
            batcher
                .query::<String, _>(&conn, &echo(n), Duration::from_secs(1))
                .await
        })
    }

    /// Scripts sent by requests that are ready at the same moment leave in one write, and each
    /// request gets its own answer. (On one worker, as on a gateway, the flush task spawned by
    /// the first request would run right after it, alone, were it not for its yield.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn concurrent_scripts_share_one_write() {
        let batcher = Arc::new(Batcher::default());
        let conn = Echo::default();
        let queries = (0..20).map(|n| spawn_echo(&batcher, &conn, n));
        let answers = futures_util::future::join_all(queries).await;
        for (n, answer) in answers.into_iter().enumerate() {
            assert_eq!(answer.expect("no panic").expect("an answer"), n.to_string());
        }
        assert_eq!(conn.writes.load(Ordering::SeqCst), 1);
    }

    /// A request that gives up while its batch is in flight (its client hung up) takes nobody
    /// else's answer with it: the flush task, not the first request, answers the others.
    #[tokio::test]
    async fn a_request_that_gives_up_does_not_lose_the_others_answers() {
        let batcher = Arc::new(Batcher::default());
        let conn = Echo::after(Duration::from_millis(50));
        let first = spawn_echo(&batcher, &conn, 0);
        let second = spawn_echo(&batcher, &conn, 1);
        tokio::time::sleep(Duration::from_millis(10)).await;
        first.abort();
        assert_eq!(second.await.expect("no panic").expect("an answer"), "1");
        assert_eq!(conn.writes.load(Ordering::SeqCst), 1);
    }

    /// A request that gave up before its batch left is not sent.
    #[tokio::test]
    async fn a_request_gone_before_its_batch_leaves_is_not_sent() {
        let batcher = Arc::new(Batcher::default());
        let conn = Echo::default();
        let first = echo(0);
        let mut gone = Box::pin(batcher.query::<String, _>(&conn, &first, Duration::from_secs(1)));
        tokio::select! {
            biased;
            _ = &mut gone => panic!("answered before its batch left"),
            () = std::future::ready(()) => {}
        }
        drop(gone);
        let kept = batcher
            .query::<String, _>(&conn, &echo(1), Duration::from_secs(1))
            .await;
        assert_eq!(kept.expect("an answer"), "1");
        assert_eq!(conn.commands.load(Ordering::SeqCst), 1);
    }

    /// A batch that gets no answer in time answers every script of it with a timeout.
    #[tokio::test]
    async fn a_batch_without_an_answer_times_out_as_a_whole() {
        let batcher = Arc::new(Batcher::default());
        let conn = Echo::after(Duration::from_secs(5));
        let answer = batcher
            .query::<String, _>(&conn, &echo(7), Duration::from_millis(20))
            .await;
        assert!(Batcher::timed_out(&answer.expect_err("no answer in time")));
    }
}

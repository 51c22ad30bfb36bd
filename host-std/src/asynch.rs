//! The async API: the same [`Client`], [`Session`] and event stream as the
//! blocking API, with `async fn` calls and events as a
//! [`futures_core::Stream`].
//!
//! It is a layer over the same connection: the same reader pump, the same
//! engine and its deadlines (kept by the same timer thread), the same
//! per-session event queues and dispatchers, the same handler pool. A call
//! inserts its waiter in the engine as a blocking call does, but the waiter
//! is a slot whose waker the reader (or the timer, or the end of the
//! connection) wakes; no executor is required and none is named, so it runs
//! under tokio (either runtime), async-std, smol or a minimal `block_on`.
//!
//! No executor thread ever blocks. Sending queues a frame for the writer
//! thread; when a CLI that reads nothing has let the outbox fill, the call
//! awaits room (woken by the writer thread) until its deadline, which the
//! engine's timer keeps. Every answer and event arrives through a waker.
//! Starting a CLI (a process and a handshake), [`Client::stop`] and
//! [`Client::force_stop`] run on a one-off thread that completes their
//! future; a client dropped without `stop` kills and reaps its CLI on one
//! too. Every call of the blocking API has its async form here, under
//! the same name; [`Client::with_timeout`] and [`Session::with_timeout`]
//! give calls their own deadline, as the blocking ones do.
//!
//! Handlers ([`SessionConfig::on_permission`], tools, ...) run on the
//! client's handler pool, never on the user's executor, under the engine's
//! handler deadline (past it the engine refuses and a late answer is not
//! sent). Every handler kind has an async form whose answer is a future:
//! [`permission_handler`], [`user_input_handler`], [`elicitation_handler`],
//! [`mcp_oauth_handler`], [`exit_plan_mode_handler`], [`tool`] and
//! [`command`], all one adapter ([`AsyncHandler`]). The pool thread drives
//! the future with a small executor of its own: the library then needs no
//! spawn hook into the user's runtime and a slow handler never holds up the
//! user's tasks. Once the deadline has passed and the engine has refused
//! the wait, the future is dropped, which releases what it holds and gives
//! its pool thread back (a blocking handler can only run on until it
//! returns). A handler future that needs a runtime's reactor (its timers,
//! its sockets) spawns that work on the runtime and awaits the join handle,
//! which completes through a waker like any future.
//!
//! Cancel safety: dropping any future of this module is safe. A dropped
//! call's request is forgotten (a late answer is counted as unmatched; a
//! frame still waiting for room is not sent); a dropped
//! [`Session::send_and_wait`] unsubscribes its waiter, and every event
//! still goes to the session's streams, so the session is used again as if
//! nothing happened.
//!
//! ```no_run
//! # async fn run() -> copilot_host::Result<()> {
//! use copilot_host::asynch::{self, Client};
//! use copilot_host::{ClientOptions, PermissionDecision, SessionConfig};
//! use std::time::Duration;
//!
//! let client = Client::start(ClientOptions::default()).await?;
//! // Handlers may be async too: this one could await a web request.
//! let config = SessionConfig::with_model("claude-sonnet-4.5").on_permission(asynch::permission_handler(
//!     |request| async move {
//!         println!("allowing {}", request.kind);
//!         PermissionDecision::ApproveOnce
//!     },
//! ));
//! let session = client.create_session(config).await?;
//! let mut events = session.events(); // a Stream; `events.next().await` also works
//! // The timeout covers the whole turn; dropping the future is safe too.
//! if let Some(reply) = session.send_and_wait("What is 2 + 2?", Duration::from_secs(60)).await? {
//!     println!("{reply:?}");
//! }
//! # drop(events.try_next());
//! client.stop().await?;
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use copilot_core::{EngineStats, RequestId, Stats};
use serde::Serialize;
use serde_json::{json, Value};

use crate::client::{parse, read_delete, read_last_id, read_session_list};
use crate::config::SessionConfig;
use crate::connection::{Answering, CloseCause, Completion, Connection, Reply, ReplyTx, Waiter, WakerSlot};
use crate::error::{Error, Result};
use crate::events::{CommandExecuteData, ElicitationRequestedData, LifecycleEvent, McpOauthRequiredData, SessionEvent};
use crate::handlers::{
    Command, ElicitationHandler, ElicitationResponse, ExitPlanModeHandler, ExitPlanModeRequest, ExitPlanModeResponse,
    McpOAuthHandler, OAuthToken, PermissionDecision, PermissionHandler, PermissionRequest, Tool, ToolInvocation,
    ToolResult, UserInputHandler, UserInputRequest, UserInputResponse,
};
use crate::inbox::{Batch, Inbox, InboxTx};
use crate::session::{
    raw_params, read_command_error, read_message_id, read_messages, send_params, MessageOptions, SessionInner,
    SessionStats, Sink, Subscription, Turn,
};
use crate::{AuthStatus, ClientOptions, Pong, ServerInfo, SessionMetadata, Status};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// -------------------------------------------------------------------------
// Events: an unbounded queue the dispatcher fills and a future drains (the
// blocking stream's `Inbox`, polled).

/// The dispatcher's end of an async subscription. Dropping the last clone
/// (the subscription ended) ends the stream.
pub(crate) struct EventTx {
    inbox: Arc<Inbox>,
    /// Shared by the clones: the last one dropped ends the stream.
    _end: Arc<InboxTx>,
}

impl Clone for EventTx {
    fn clone(&self) -> Self {
        EventTx { inbox: Arc::clone(&self.inbox), _end: Arc::clone(&self._end) }
    }
}

impl EventTx {
    /// Queues `event` and wakes the reader; `false` once the receiver is gone.
    pub(crate) fn send(&self, event: Arc<SessionEvent>) -> bool {
        self.inbox.send(event)
    }

    /// Queues a batch of unparsed events (see `Inbox::send_batch`).
    pub(crate) fn send_batch(&self, batch: &Arc<Batch>, counts: bool) -> bool {
        self.inbox.send_batch(batch, counts)
    }
}

fn event_channel(inbox: Arc<Inbox>) -> (EventTx, EventRx) {
    let end = Arc::new(InboxTx(Arc::clone(&inbox)));
    (EventTx { inbox: Arc::clone(&inbox), _end: end }, EventRx { inbox })
}

struct EventRx {
    inbox: Arc<Inbox>,
}

impl EventRx {
    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Arc<SessionEvent>>> {
        self.inbox.poll_recv(cx)
    }
}

impl Drop for EventRx {
    fn drop(&mut self) {
        self.inbox.receiver_gone();
    }
}

// -------------------------------------------------------------------------
// Lifecycle notifications: a plain queue the reader fills and a future
// drains.

struct QueueState<T> {
    items: VecDeque<T>,
    /// The sender is gone: the stream ends after what is queued.
    ended: bool,
    /// The receiver is gone: the subscription ends at the next item.
    gone: bool,
    waker: Option<Waker>,
}

struct Queue<T> {
    state: Mutex<QueueState<T>>,
}

impl<T> Queue<T> {
    fn new() -> Self {
        Queue { state: Mutex::new(QueueState { items: VecDeque::new(), ended: false, gone: false, waker: None }) }
    }

    fn change(&self, f: impl FnOnce(&mut QueueState<T>)) {
        let mut s = lock(&self.state);
        f(&mut s);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The producer's end of a [`Queue`]. Dropping it ends the stream.
struct QueueTx<T> {
    queue: Arc<Queue<T>>,
}

impl<T> Drop for QueueTx<T> {
    fn drop(&mut self) {
        self.queue.change(|s| s.ended = true);
    }
}

impl<T> QueueTx<T> {
    /// Queues `item` and wakes the receiver; `false` once the receiver is gone.
    fn send(&self, item: T) -> bool {
        let mut gone = false;
        self.queue.change(|s| {
            gone = s.gone;
            if !gone {
                s.items.push_back(item);
            }
        });
        !gone
    }
}

fn queue_channel<T>() -> (QueueTx<T>, QueueRx<T>) {
    let queue = Arc::new(Queue::new());
    (QueueTx { queue: Arc::clone(&queue) }, QueueRx { queue })
}

struct QueueRx<T> {
    queue: Arc<Queue<T>>,
}

impl<T> QueueRx<T> {
    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = lock(&self.queue.state);
        if let Some(e) = s.items.pop_front() {
            return Poll::Ready(Some(e));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    fn try_recv(&self) -> Option<T> {
        lock(&self.queue.state).items.pop_front()
    }
}

impl<T> Drop for QueueRx<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.queue.state);
        s.gone = true;
        s.items.clear();
    }
}

/// An async stream of a session's events ([`Session::events`]). It never
/// drops an event and ends when the session is destroyed, dropped or
/// disconnected.
pub struct EventStream {
    rx: EventRx,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// The next event; `None` once the stream ended. Cancel-safe: an event
    /// is taken only by the poll that returns it.
    pub async fn next(&mut self) -> Option<Arc<SessionEvent>> {
        poll_fn(|cx| self.rx.poll_recv(cx)).await
    }

    /// The next event if one is already here.
    pub fn try_next(&mut self) -> Option<Arc<SessionEvent>> {
        self.rx.inbox.try_recv()
    }
}

impl futures_core::Stream for EventStream {
    type Item = Arc<SessionEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// An async stream of `session.lifecycle` notifications
/// ([`Client::lifecycle_events`]): every one from its creation on, in
/// order. It ends when the connection does.
pub struct LifecycleStream {
    rx: QueueRx<LifecycleEvent>,
}

impl std::fmt::Debug for LifecycleStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleStream").finish_non_exhaustive()
    }
}

impl LifecycleStream {
    /// The next notification; `None` once the connection ended.
    /// Cancel-safe.
    pub async fn next(&mut self) -> Option<LifecycleEvent> {
        poll_fn(|cx| self.rx.poll_recv(cx)).await
    }

    /// The next notification if one is already here.
    pub fn try_next(&mut self) -> Option<LifecycleEvent> {
        self.rx.try_recv()
    }
}

impl futures_core::Stream for LifecycleStream {
    type Item = LifecycleEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

// -------------------------------------------------------------------------
// Calls: a request whose answer completes a slot.

/// One request in flight. Dropping it before its answer forgets the
/// request in the engine (and a frame still waiting for room is not sent).
pub(crate) struct Call {
    conn: Arc<Connection>,
    slot: Arc<Completion<Reply>>,
    id: Option<RequestId>,
    /// The request's frame, until the outbox has room for it.
    frame: Option<Vec<u8>>,
    method: String,
    started: Instant,
}

impl Call {
    /// Inserts the request in the engine with `deadline`; its frame is
    /// queued when the call is first polled. `waiter` is built around the
    /// call's slot.
    fn start<P: Serialize + ?Sized>(
        conn: &Arc<Connection>,
        method: &str,
        params: &P,
        waiter: impl FnOnce(ReplyTx) -> Waiter,
        deadline: Instant,
    ) -> Result<Call> {
        let slot = Arc::new(Completion::default());
        let started = Instant::now();
        let (id, frame) =
            conn.prepare_request_async(method, params, waiter(ReplyTx::Async(Arc::clone(&slot))), deadline)?;
        Ok(Call { conn: Arc::clone(conn), slot, id: Some(id), frame: Some(frame), method: method.to_owned(), started })
    }

    fn timeout(&self, what: String) -> Error {
        Error::Timeout { what, after: self.started.elapsed() }
    }
}

impl Future for Call {
    type Output = Result<Vec<u8>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // Once queued, only the slot counts: an answer that came before the
        // connection ended is still the call's result.
        let queued = this.frame.is_none()
            || match this.conn.poll_send_frame(&mut this.frame, cx) {
                Poll::Ready(Ok(())) => true,
                Poll::Ready(Err(e)) => {
                    this.frame = None;
                    if let Some(id) = this.id.take() {
                        this.conn.forget(id);
                    }
                    return Poll::Ready(Err(e));
                }
                // Waiting for room: the engine's deadline still runs, and its
                // timer completes the slot if room does not come in time.
                Poll::Pending => false,
            };
        let reply = match this.slot.poll_take(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(reply) => reply,
        };
        this.id = None;
        this.frame = None;
        Poll::Ready(match reply {
            Some(Err(Error::Timeout { .. })) if !queued => {
                Err(this.timeout(format!("room to send `{}` (the CLI reads nothing)", this.method)))
            }
            Some(Err(Error::Timeout { .. })) => Err(this.timeout(format!("`{}`", this.method))),
            Some(reply) => reply,
            None => Err(Error::Disconnected("the call was already answered".into())),
        })
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            if !self.slot.is_done() {
                self.conn.forget(id);
            }
        }
    }
}

pub(crate) fn request<P: Serialize + ?Sized>(
    conn: &Arc<Connection>,
    method: &str,
    params: &P,
    deadline: Instant,
) -> Result<Call> {
    Call::start(conn, method, params, Waiter::Reply, deadline)
}

/// Runs a blocking step (a process start, a handshake, a stop) on a one-off
/// thread whose end completes the future.
async fn on_thread<T: Send + 'static>(name: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let slot: Arc<Completion<Result<T>>> = Arc::new(Completion::default());
    let done = Arc::clone(&slot);
    std::thread::Builder::new().name(name.to_owned()).spawn(move || done.complete(f())).map_err(Error::Io)?;
    poll_fn(|cx| slot.poll_take(cx))
        .await
        .unwrap_or_else(|| Err(Error::Disconnected("the start thread ended without an answer".into())))
}

/// Waits until `deadline`; the connection's timer thread wakes the wait,
/// so no executor timer is needed. `ready` is checked first at every poll.
async fn until<T>(
    conn: &Connection,
    deadline: Instant,
    mut ready: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> Option<T> {
    let slot: WakerSlot = Arc::default();
    let mut armed = false;
    poll_fn(|cx| {
        if let Poll::Ready(v) = ready(cx) {
            return Poll::Ready(Some(v));
        }
        if Instant::now() >= deadline {
            return Poll::Ready(None);
        }
        *lock(&slot) = Some(cx.waker().clone());
        if !armed {
            armed = true;
            conn.wake_at(deadline, Arc::clone(&slot));
        }
        Poll::Pending
    })
    .await
}

// -------------------------------------------------------------------------
// Async handlers.

/// How often a handler future past the handler deadline looks whether the
/// engine has refused its wait yet (the timer thread does it at the
/// deadline; this only covers the moment between).
const REFUSAL_CHECK: Duration = Duration::from_millis(10);

/// Drives `future` on this thread (a handler pool thread), parking it
/// between wakes. Once the handler deadline has passed and the engine has
/// refused the wait, the future is dropped (whatever it holds is released
/// and the pool thread is free again) and `abandoned` makes the answer,
/// which is stale and so never sent.
fn drive<F: Future>(future: F, abandoned: impl FnOnce() -> F::Output) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    // The engine's deadline for the wait is at most the handler timeout
    // from now (the wait was opened before this handler started).
    let wait = Answering::current();
    let give_up_at = wait.as_ref().and_then(Answering::timeout).map(|t| Instant::now() + t);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        match (&wait, give_up_at) {
            (Some(wait), Some(at)) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => std::thread::park_timeout(left),
                _ if !wait.is_open() => {
                    log::debug!("an async handler ran past its deadline; the engine refused its wait, it is dropped");
                    return abandoned();
                }
                _ => std::thread::park_timeout(REFUSAL_CHECK),
            },
            _ => std::thread::park(),
        }
    }
}

/// A handler whose answer is a future, for any handler kind: the blocking
/// handler traits are implemented for it, so the `SessionConfig` methods
/// take it as they take a blocking handler. The handler pool thread that
/// runs it drives the future (see the [module docs](self)), under the
/// engine's handler deadline, past which the future is dropped; a handler
/// that panics gets the kind's refusal, as a blocking one does. Made by
/// [`permission_handler`],
/// [`user_input_handler`], [`elicitation_handler`], [`mcp_oauth_handler`]
/// and [`exit_plan_mode_handler`]; [`tool`] and [`command`] use it too.
pub struct AsyncHandler<F> {
    handler: F,
}

impl<F> std::fmt::Debug for AsyncHandler<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncHandler").finish_non_exhaustive()
    }
}

impl<F> AsyncHandler<F> {
    /// Calls the handler with its own copy of `request` and drives the
    /// future to its answer on this (handler pool) thread; `abandoned` is
    /// the (never sent) answer of a future dropped past the deadline.
    fn run<R: Clone, Fut: Future>(&self, request: &R, abandoned: impl FnOnce() -> Fut::Output) -> Fut::Output
    where
        F: Fn(R) -> Fut,
    {
        drive((self.handler)(request.clone()), abandoned)
    }
}

/// Each line: the async form of one handler kind, named after its trait
/// (`name: Trait::method(Request) -> Answer, else Abandoned`; `Abandoned`
/// stands for the answer of a future dropped past the deadline, which is
/// never sent as the engine has refused the wait). A new kind is one more
/// line.
macro_rules! async_handlers {
    ($($(#[$doc:meta])* $name:ident: $kind:ident::$method:ident($request:ty) -> $answer:ty, else $abandoned:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name<F, Fut>(handler: F) -> AsyncHandler<F>
        where
            F: Fn($request) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = $answer>,
        {
            AsyncHandler { handler }
        }

        impl<F, Fut> $kind for AsyncHandler<F>
        where
            F: Fn($request) -> Fut + Send + Sync,
            Fut: Future<Output = $answer>,
        {
            fn $method(&self, request: &$request) -> $answer {
                self.run(request, || $abandoned)
            }
        }
    )*};
}

async_handlers! {
    /// A permission handler whose decision is a future (a web request, a
    /// person asked over a socket): pass it to
    /// [`SessionConfig::on_permission`].
    permission_handler: PermissionHandler::decide(PermissionRequest) -> PermissionDecision,
        else PermissionDecision::UserNotAvailable;
    /// A user input handler (`ask_user`) whose answer is a future: pass it
    /// to [`SessionConfig::on_user_input`]. `None` refuses.
    user_input_handler: UserInputHandler::answer(UserInputRequest) -> Option<UserInputResponse>, else None;
    /// An elicitation handler whose answer is a future: pass it to
    /// [`SessionConfig::on_elicitation`].
    elicitation_handler: ElicitationHandler::answer(ElicitationRequestedData) -> ElicitationResponse,
        else ElicitationResponse::Cancel;
    /// An MCP OAuth handler whose token is a future (a browser flow): pass
    /// it to [`SessionConfig::on_mcp_oauth`]. `None` cancels.
    mcp_oauth_handler: McpOAuthHandler::token(McpOauthRequiredData) -> Option<OAuthToken>, else None;
    /// An exit-plan-mode handler whose answer is a future: pass it to
    /// [`SessionConfig::on_exit_plan_mode`].
    exit_plan_mode_handler: ExitPlanModeHandler::answer(ExitPlanModeRequest) -> ExitPlanModeResponse,
        else ExitPlanModeResponse { approved: false, selected_action: None, feedback: None };
}

/// A tool whose calls an async `handler` answers (as [`Tool::new`]); the
/// future runs on the handler pool under the engine's handler deadline.
pub fn tool<F, Fut, R>(name: impl Into<String>, description: impl Into<String>, parameters: Value, handler: F) -> Tool
where
    F: Fn(ToolInvocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R>,
    R: Into<ToolResult>,
{
    Tool::new(name, description, parameters, move |call: &ToolInvocation| {
        let result = handler(call.clone());
        drive(async move { result.await.into() }, || {
            ToolResult::Failure("the tool ran past the handler deadline".into())
        })
    })
}

/// A slash command an async `handler` runs (as [`Command::new`]); an `Err`
/// is reported to the caller. The future runs on the handler pool under
/// the engine's handler deadline.
pub fn command<F, Fut>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Command
where
    F: Fn(CommandExecuteData) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), String>>,
{
    let handler = AsyncHandler { handler };
    Command::new(name, description, move |data: &CommandExecuteData| {
        handler.run(data, || Err("the command ran past the handler deadline".into()))
    })
}

// -------------------------------------------------------------------------
// The client.

/// An async client: [`crate::Client`]'s connection, awaited.
#[derive(Debug)]
pub struct Client {
    /// Always there; taken only by `stop`, `force_stop` and `drop`.
    inner: Option<crate::Client>,
}

impl Client {
    /// Starts a CLI and connects to it ([`crate::Client::start`], on a
    /// one-off thread).
    pub async fn start(options: ClientOptions) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::start(options)).await.map(Client::from)
    }

    /// Connects to a CLI already serving TCP at `addr`
    /// ([`crate::Client::connect_with`], on a one-off thread).
    pub async fn connect(addr: std::net::SocketAddr, token: Option<String>, options: ClientOptions) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::connect_with(addr, token.as_deref(), &options))
            .await
            .map(Client::from)
    }

    /// Runs the client over any byte stream pair
    /// ([`crate::Client::from_streams_with`]; the handshake runs on a
    /// one-off thread).
    pub async fn from_streams(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        token: Option<String>,
        options: ClientOptions,
    ) -> Result<Client> {
        on_thread("copilot-start", move || crate::Client::from_streams_with(reader, writer, token.as_deref(), &options))
            .await
            .map(Client::from)
    }

    /// The blocking client on the same connection (its calls block the
    /// calling thread).
    pub fn blocking(&self) -> &crate::Client {
        self.inner.as_ref().expect("the client is there until it is stopped")
    }

    fn conn(&self) -> &Arc<Connection> {
        self.blocking().conn()
    }

    /// For a TCP connection: the CLI's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.blocking().peer_addr()
    }

    /// What the handshake learned.
    pub fn server_info(&self) -> &ServerInfo {
        self.blocking().server_info()
    }

    /// The router's counters ([`crate::Client::stats`]).
    pub fn stats(&self) -> Stats {
        self.blocking().stats()
    }

    /// Frames that could not be parked ([`crate::Client::parked_overflow`]).
    pub fn parked_overflow(&self) -> u64 {
        self.blocking().parked_overflow()
    }

    /// The protocol engine's counters ([`crate::Client::engine_stats`]).
    pub fn engine_stats(&self) -> EngineStats {
        self.blocking().engine_stats()
    }

    /// Why the connection ended, or `None` while it is open.
    pub fn closed(&self) -> Option<CloseCause> {
        self.blocking().closed()
    }

    /// Waits until the connection ends (at most `timeout`, if given: the
    /// client's timer thread keeps it) and says why; `None` if it is still
    /// open at the timeout.
    pub async fn wait_closed(&self, timeout: Option<Duration>) -> Option<CloseCause> {
        /// Completes the wait when the connection drops it (at its end).
        struct OnDrop(Arc<Completion<()>>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.complete(());
            }
        }
        let ended = Arc::new(Completion::default());
        let guard = OnDrop(Arc::clone(&ended));
        // Dropped by the connection when it ends; a wait given up on leaves
        // at the next notification.
        self.conn().subscribe_lifecycle_with(Box::new(move |_| Arc::strong_count(&guard.0) > 1));
        let ended = |cx: &mut Context<'_>| ended.poll_take(cx).map(drop);
        match timeout {
            None => poll_fn(ended).await,
            Some(t) => until(self.conn(), Instant::now() + t, ended).await?,
        }
        self.closed()
    }

    /// The process id of the CLI this client started, if it started one.
    pub fn cli_pid(&self) -> Option<u32> {
        self.blocking().cli_pid()
    }

    /// The calls of this client with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`]:
    /// `client.with_timeout(Duration::from_secs(2)).ping(None).await`.
    pub fn with_timeout(&self, timeout: Duration) -> Calls<'_> {
        Calls { client: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> Calls<'_> {
        Calls { client: self, timeout: None }
    }

    /// `ping`.
    pub async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        self.calls().ping(message).await
    }

    /// `status.get`.
    pub async fn status(&self) -> Result<Status> {
        self.calls().status().await
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        self.calls().call(method, params).await
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        self.calls().auth_status().await
    }

    /// `session.list`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        self.calls().list_sessions().await
    }

    /// `session.delete`: removes a session's persisted state.
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        self.calls().delete_session(session_id).await
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub async fn last_session_id(&self) -> Result<Option<String>> {
        self.calls().last_session_id().await
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.calls().create_session(config).await
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.calls().resume_session(session_id, config).await
    }

    /// A stream of every `session.lifecycle` notification from now on.
    pub fn lifecycle_events(&self) -> LifecycleStream {
        let (tx, rx) = queue_channel();
        // Dropped (ending the stream) when the connection ends.
        self.conn().subscribe_lifecycle_with(Box::new(move |e| tx.send(e.clone())));
        LifecycleStream { rx }
    }

    /// Stops the client ([`crate::Client::stop`], bounded by
    /// [`ClientOptions::shutdown_grace`], on a one-off thread).
    pub async fn stop(self) -> Result<()> {
        let inner = self.take();
        on_thread("copilot-stop", move || inner.stop()).await
    }

    /// Stops at once ([`crate::Client::force_stop`], on a one-off thread:
    /// it may wait for the CLI's process to be reaped).
    pub async fn force_stop(self) {
        let inner = self.take();
        let _ = on_thread("copilot-stop", move || {
            inner.force_stop();
            Ok(())
        })
        .await;
    }
}

impl Client {
    fn take(mut self) -> crate::Client {
        self.inner.take().expect("the client is there until it is stopped")
    }
}

impl From<crate::Client> for Client {
    fn from(inner: crate::Client) -> Self {
        Client { inner: Some(inner) }
    }
}

impl Drop for Client {
    /// A client dropped without [`stop`](Client::stop) kills the CLI it
    /// started and reaps it: on a one-off thread, so as not to wait on the
    /// executor's.
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        if inner.cli_pid().is_some() {
            // If no thread can be started, the client is dropped here.
            let _ = std::thread::Builder::new().name("copilot-drop".into()).spawn(move || drop(inner));
        }
    }
}

/// The calls of an async [`Client`] with a timeout of their own
/// ([`Client::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct Calls<'a> {
    client: &'a Client,
    timeout: Option<Duration>,
}

impl Calls<'_> {
    fn conn(&self) -> &Arc<Connection> {
        self.client.conn()
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.conn().deadlines.request)
    }

    async fn body<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Vec<u8>> {
        request(self.conn(), method, params, self.deadline())?.await
    }

    /// `ping`.
    pub async fn ping(&self, message: Option<&str>) -> Result<Pong> {
        parse(&self.body("ping", &json!({ "message": message })).await?, "ping")
    }

    /// `status.get`.
    pub async fn status(&self) -> Result<Status> {
        parse(&self.body("status.get", &json!({})).await?, "status.get")
    }

    /// Calls any method this crate does not wrap, with JSON params, and
    /// returns the JSON result.
    pub async fn call(&self, method: &str, params: &Value) -> Result<Value> {
        parse(&self.body(method, params).await?, method)
    }

    /// `auth.getStatus`: whether the CLI has a Copilot login.
    pub async fn auth_status(&self) -> Result<AuthStatus> {
        parse(&self.body("auth.getStatus", &json!({})).await?, "auth.getStatus")
    }

    /// `session.list`.
    pub async fn list_sessions(&self) -> Result<Vec<SessionMetadata>> {
        read_session_list(&self.body("session.list", &json!({})).await?)
    }

    /// `session.delete`: removes a session's persisted state.
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        read_delete(&self.body("session.delete", &json!({ "sessionId": session_id })).await?)
    }

    /// `session.getLastId`: the most recently updated session, if any.
    pub async fn last_session_id(&self) -> Result<Option<String>> {
        read_last_id(&self.body("session.getLastId", &json!({})).await?)
    }

    /// Creates a session; its slot is reserved before `session.create` is
    /// sent, so events that race the answer are delivered.
    pub async fn create_session(&self, config: SessionConfig) -> Result<Session> {
        self.open("session.create", config, None).await
    }

    /// Resumes a session by id, reserved before `session.resume` is sent.
    pub async fn resume_session(&self, session_id: &str, config: SessionConfig) -> Result<Session> {
        self.open("session.resume", config, Some(session_id.to_owned())).await
    }

    async fn open(&self, method: &str, config: SessionConfig, resume: Option<String>) -> Result<Session> {
        config.check(resume.is_some())?;
        let conn = self.conn();
        let resuming = resume.is_some();
        let id = match (resume, config.server_assigned_id) {
            (Some(id), _) => Some(id),
            (None, true) => None,
            (None, false) => Some(config.session_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string())),
        };
        let params = config.to_params(id.as_deref(), resuming)?;
        let inner = SessionInner::new(id.as_deref(), config.answerers(), conn);
        let handle = conn.reserve(id.as_deref(), resuming, inner.clone())?;
        let target = inner.clone();
        // The reader completes the open in the engine and releases the slot
        // on any failure; dropping the call (or its timeout) releases it too.
        let call = Call::start(conn, method, &params, |reply| Waiter::Open { handle, target, reply }, self.deadline());
        let body = match call {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                inner.close("the session could not be opened");
                return Err(e);
            }
        };
        let result: Value = parse(&body, method)?;
        let id = inner.name().unwrap_or_default();
        let session = Session { inner: crate::Session::new(inner, Arc::clone(conn), handle, id, &result) };
        if config.handlers.mcp_oauth.is_some() {
            // The CLI sends mcp.oauth_required only to clients that ask;
            // MCP servers connect at the first send, so now is in time.
            let params = json!({ "sessionId": session.id(), "eventType": "mcp.oauth_required" });
            self.body("session.eventLog.registerInterest", &params).await?;
        }
        Ok(session)
    }
}

// -------------------------------------------------------------------------
// Sessions.

/// An open session, awaited. Dropping it detaches it, as dropping a
/// [`crate::Session`] does.
#[derive(Debug)]
pub struct Session {
    inner: crate::Session,
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// Where the CLI keeps this session's state, if it said.
    pub fn workspace_path(&self) -> Option<&std::path::Path> {
        self.inner.workspace_path()
    }

    /// Delivery counters ([`crate::Session::stats`]).
    pub fn stats(&self) -> SessionStats {
        self.inner.stats()
    }

    /// The blocking session on the same connection (its calls block the
    /// calling thread).
    pub fn blocking(&self) -> &crate::Session {
        &self.inner
    }

    fn conn(&self) -> &Arc<Connection> {
        &self.inner.conn
    }

    /// The calls of this session with their own `timeout` in place of
    /// [`ClientOptions::request_timeout`]:
    /// `session.with_timeout(Duration::from_secs(2)).abort().await`.
    pub fn with_timeout(&self, timeout: Duration) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: Some(timeout) }
    }

    fn calls(&self) -> SessionCalls<'_> {
        SessionCalls { session: self, timeout: None }
    }

    /// Sends a prompt; returns the message id. Events of the turn follow.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.calls().send(message).await
    }

    /// Sends a prompt and waits until the session is idle: the last
    /// `assistant.message` of the turn (`None` if none), or
    /// [`Error::Session`] for a `session.error`. `timeout` covers the whole
    /// call, the send included: past it the call returns
    /// [`Error::Timeout`] (the timer thread wakes it; no executor timer is
    /// needed). Dropping this future is safe too: the session stays usable
    /// and its streams lose nothing. When it returns, every handler of
    /// [`on`](Self::on) has run on the turn's events.
    pub async fn send_and_wait(
        &self,
        message: impl Into<MessageOptions>,
        timeout: Duration,
    ) -> Result<Option<Arc<SessionEvent>>> {
        let deadline = Instant::now() + timeout;
        // Subscribe before sending so nothing of the turn can be missed.
        let (tx, rx) = event_channel(self.inner.inner.inbox());
        let id = self.inner.inner.subscribe(Sink::Async { tx, waiter: true }, false);
        let _unsubscribe = Subscription { session: Arc::downgrade(&self.inner.inner), id };
        let calls = self.calls();
        calls.send_until(message.into(), deadline.min(calls.deadline())).await?;
        let mut turn = Turn::default();
        loop {
            let Some(next) = until(self.conn(), deadline, |cx| rx.poll_recv(cx)).await else {
                return Err(Error::Timeout { what: "session.idle".into(), after: timeout });
            };
            let Some(event) = next else {
                let why = self.inner.inner.end_reason().unwrap_or_else(|| "its delivery ended".into());
                return Err(Error::Disconnected(format!("the session ended before it was idle: {why}")));
            };
            if turn.see(&event) {
                break;
            }
        }
        turn.finish()
    }

    /// Runs a slash command declared with [`SessionConfig::command`] (or by
    /// another client): `session.commands.execute`. Returns the error text
    /// its handler reported, if any.
    pub async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        self.calls().execute_command(name, args).await
    }

    /// Aborts the running turn (harmless when idle).
    pub async fn abort(&self) -> Result<()> {
        self.calls().abort().await
    }

    /// Calls a session method this crate does not wrap; `sessionId` is
    /// added to `params` (a JSON object, or null for none).
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        self.calls().call_raw(method, params).await
    }

    /// The session's persisted events (`session.getMessages`).
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        self.calls().messages().await
    }

    /// A stream of this session's events. The first subscriber (stream or
    /// handler) also receives every event that arrived before it.
    pub fn events(&self) -> EventStream {
        let (tx, rx) = event_channel(self.inner.inner.inbox());
        self.inner.inner.subscribe(Sink::Async { tx, waiter: false }, true);
        EventStream { rx }
    }

    /// Calls `handler` for every event, on the session's dispatcher thread
    /// (never on the executor), as [`crate::Session::on`] does; dropping
    /// the subscription unsubscribes. The first subscriber also receives
    /// earlier events. For async work per event, read [`events`](Self::events).
    pub fn on(&self, handler: impl Fn(&SessionEvent) + Send + Sync + 'static) -> Subscription {
        self.inner.on(handler)
    }

    /// Destroys the session in the CLI and ends its streams, waiting for
    /// the CLI at most [`ClientOptions::shutdown_grace`]; the session is
    /// released whatever the CLI does (or if this future is dropped).
    pub async fn destroy(self) -> Result<()> {
        let grace = self.conn().deadlines.grace;
        self.destroy_within(grace).await
    }

    /// [`destroy`](Self::destroy), waiting for the CLI at most `grace`.
    pub async fn destroy_within(self, grace: Duration) -> Result<()> {
        let s = self.inner;
        s.conn.close_session(s.handle);
        let result = match request(&s.conn, "session.destroy", &json!({ "sessionId": s.id() }), Instant::now() + grace)
        {
            Ok(call) => call.await,
            Err(e) => Err(e),
        };
        s.end("destroyed");
        result.map(drop)
    }
}

/// The calls of an async [`Session`] with a timeout of their own
/// ([`Session::with_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct SessionCalls<'a> {
    session: &'a Session,
    timeout: Option<Duration>,
}

impl SessionCalls<'_> {
    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout.unwrap_or(self.session.conn().deadlines.request)
    }

    fn id(&self) -> &str {
        self.session.id()
    }

    async fn call_until<P: Serialize + ?Sized>(&self, method: &str, params: &P, deadline: Instant) -> Result<Value> {
        parse(&request(self.session.conn(), method, params, deadline)?.await?, method)
    }

    async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Value> {
        self.call_until(method, params, self.deadline()).await
    }

    /// Sends a prompt; returns the message id.
    pub async fn send(&self, message: impl Into<MessageOptions>) -> Result<String> {
        self.send_until(message.into(), self.deadline()).await
    }

    async fn send_until(&self, message: MessageOptions, deadline: Instant) -> Result<String> {
        let params = send_params(self.id(), message)?;
        Ok(read_message_id(&self.call_until("session.send", &params, deadline).await?))
    }

    /// See [`Session::execute_command`].
    pub async fn execute_command(&self, name: &str, args: &str) -> Result<Option<String>> {
        let params = json!({ "sessionId": self.id(), "commandName": name, "args": args });
        Ok(read_command_error(&self.call("session.commands.execute", &params).await?))
    }

    /// See [`Session::abort`].
    pub async fn abort(&self) -> Result<()> {
        self.call("session.abort", &json!({ "sessionId": self.id() })).await.map(drop)
    }

    /// See [`Session::call_raw`].
    pub async fn call_raw(&self, method: &str, params: Value) -> Result<Value> {
        let params = raw_params(self.id(), method, params)?;
        self.call(method, &params).await
    }

    /// See [`Session::messages`].
    pub async fn messages(&self) -> Result<Vec<SessionEvent>> {
        read_messages(&self.call("session.getMessages", &json!({ "sessionId": self.id() })).await?)
    }
}

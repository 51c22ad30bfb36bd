//! The CLI's API, typed: params and results generated from the CLI's own
//! schema (`copilot-codegen`), and every method as a call.
//!
//! Every build has the types of the model list ([`ModelList`], [`Model`]),
//! of a message's attachments ([`Attachment`]) and of model and agent
//! selection, with [`Client::list_models`](crate::Client::list_models).
//! The feature `rpc-types` adds the types of every other method and the
//! calls, namespaced as the CLI names them: server methods on a client,
//! session methods (the session's id filled in) on a session.
//!
//! ```no_run
//! # #[cfg(feature = "rpc-types")]
//! # fn main() -> copilot_host::Result<()> {
//! use copilot_host::{rpc, Client, ClientOptions, SessionConfig};
//!
//! let client = Client::start(ClientOptions::default())?;
//! let models = client.rpc().models().list(rpc::ModelsListRequest::default())?;
//! let session = client.create_session(SessionConfig::with_model(&models.models[0].id))?;
//! let params = rpc::SessionModelSwitchToParams { model_id: "gpt-4.1".into(), ..Default::default() };
//! session.rpc().model().switch_to(params)?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "rpc-types"))]
//! # fn main() {}
//! ```
//!
//! A call goes through the same path as [`Client::call`](crate::Client::call)
//! and [`Session::call_raw`](crate::Session::call_raw): the client's
//! deadline (or the one of [`Client::with_timeout`](crate::Client::with_timeout)),
//! its errors, and an answer that does not fit the result type is an
//! [`Error::Protocol`].

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

#[cfg(feature = "rpc-types")]
pub use crate::generated::rpc::*;
pub use crate::generated::rpc_core::*;
use crate::{Calls, Client, Error, Result};

fn parse<T: DeserializeOwned>(value: Value, method: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
}

fn models(answer: Value) -> Result<Vec<Model>> {
    Ok(parse::<ModelList>(answer, "models.list")?.models)
}

impl Client {
    /// `models.list`: the models the CLI offers, with their capabilities,
    /// limits, policy and billing, as the CLI's schema describes them.
    pub fn list_models(&self) -> Result<Vec<Model>> {
        models(self.call("models.list", &json!({}))?)
    }
}

impl Calls<'_> {
    /// See [`Client::list_models`].
    pub fn list_models(&self) -> Result<Vec<Model>> {
        models(self.call("models.list", &json!({}))?)
    }
}

#[cfg(feature = "async")]
impl crate::asynch::Client {
    /// See [`Client::list_models`].
    pub async fn list_models(&self) -> Result<Vec<Model>> {
        models(self.call("models.list", &json!({})).await?)
    }
}

impl Attachment {
    /// A file, by absolute path; the model sees its content.
    pub fn file(path: impl Into<String>, display_name: impl Into<String>) -> Attachment {
        Attachment::File(AttachmentFile {
            path: path.into(),
            display_name: display_name.into(),
            ..AttachmentFile::default()
        })
    }

    /// A directory, by absolute path.
    pub fn directory(path: impl Into<String>, display_name: impl Into<String>) -> Attachment {
        Attachment::Directory(AttachmentDirectory {
            path: path.into(),
            display_name: display_name.into(),
            ..AttachmentDirectory::default()
        })
    }

    /// Inline data (base64) of a MIME type, such as an image.
    pub fn blob(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Attachment {
        Attachment::Blob(AttachmentBlob {
            data: Some(data_base64.into()),
            mime_type: mime_type.into(),
            ..AttachmentBlob::default()
        })
    }
}

#[cfg(feature = "rpc-types")]
pub use calls::RpcCaller;
#[cfg(all(feature = "rpc-types", feature = "async"))]
pub use calls::RpcFuture;

#[cfg(feature = "rpc-types")]
mod calls {
    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use serde_json::Value;

    use super::{parse, ServerApi, SessionApi};
    use crate::{Calls, Client, Error, Result, Session, SessionCalls};

    /// What sends a typed call: a client or session, blocking or async.
    /// The generated APIs ([`ServerApi`], [`SessionApi`] and their groups)
    /// are written once over it.
    pub trait RpcCaller {
        /// What a call gives back: `Result<T>` when blocking, a future of
        /// it when async.
        type Call<T: DeserializeOwned>;

        /// Sends `method` with `params` (`()` for none); a session adds its
        /// `sessionId`.
        fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> Self::Call<T>;
    }

    /// `params` as a JSON object: `()` is `{}`; anything but an object is
    /// refused (the CLI takes named params only).
    pub(crate) fn object<P: Serialize>(method: &str, params: P) -> Result<serde_json::Map<String, Value>> {
        match serde_json::to_value(params) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(Value::Null) => Ok(serde_json::Map::new()),
            Ok(other) => Err(Error::Config(format!("the params of {method} must be a JSON object, not {other}"))),
            Err(e) => Err(Error::Protocol(format!("params of {method} not written: {e}"))),
        }
    }

    impl RpcCaller for Client {
        type Call<T: DeserializeOwned> = Result<T>;

        fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> Result<T> {
            parse(Client::call(self, method, &Value::Object(object(method, params)?))?, method)
        }
    }

    impl RpcCaller for Calls<'_> {
        type Call<T: DeserializeOwned> = Result<T>;

        fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> Result<T> {
            parse(Calls::call(self, method, &Value::Object(object(method, params)?))?, method)
        }
    }

    impl RpcCaller for Session {
        type Call<T: DeserializeOwned> = Result<T>;

        fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> Result<T> {
            parse(self.call_raw(method, Value::Object(object(method, params)?))?, method)
        }
    }

    impl RpcCaller for SessionCalls<'_> {
        type Call<T: DeserializeOwned> = Result<T>;

        fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> Result<T> {
            parse(self.call_raw(method, Value::Object(object(method, params)?))?, method)
        }
    }

    impl Client {
        /// The CLI's server methods as typed calls:
        /// `client.rpc().models().list(params)`.
        pub fn rpc(&self) -> ServerApi<'_, Client> {
            ServerApi(self)
        }
    }

    impl<'c> Calls<'c> {
        /// [`Client::rpc`] with this timeout.
        pub fn rpc(&self) -> ServerApi<'_, Calls<'c>> {
            ServerApi(self)
        }
    }

    impl Session {
        /// The CLI's session methods as typed calls, this session's id
        /// filled in: `session.rpc().model().switch_to(params)`.
        pub fn rpc(&self) -> SessionApi<'_, Session> {
            SessionApi(self)
        }
    }

    impl<'s> SessionCalls<'s> {
        /// [`Session::rpc`] with this timeout.
        pub fn rpc(&self) -> SessionApi<'_, SessionCalls<'s>> {
            SessionApi(self)
        }
    }

    #[cfg(feature = "async")]
    pub use self::asynch::RpcFuture;

    #[cfg(feature = "async")]
    mod asynch {
        use std::future::Future;
        use std::marker::PhantomData;
        use std::pin::Pin;
        use std::task::{Context, Poll};
        use std::time::Instant;

        use serde::de::DeserializeOwned;
        use serde::Serialize;

        use super::{object, RpcCaller, ServerApi, SessionApi};
        use crate::asynch::{Client, Session};
        use crate::driver::Call;
        use crate::{Error, Result};

        /// A typed call of the async API in flight: its result, read into
        /// `T`. Dropping it forgets the request.
        #[must_use = "a call does nothing unless awaited"]
        pub struct RpcFuture<T> {
            state: Option<Result<Call>>,
            method: &'static str,
            result: PhantomData<fn() -> T>,
        }

        impl<T> std::fmt::Debug for RpcFuture<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("RpcFuture").field("method", &self.method).finish_non_exhaustive()
            }
        }

        impl<T: DeserializeOwned> Future for RpcFuture<T> {
            type Output = Result<T>;

            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
                let method = self.method;
                let reply = match self.state.as_mut() {
                    Some(Ok(call)) => match Pin::new(call).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(reply) => reply,
                    },
                    Some(Err(_)) => match self.state.take() {
                        Some(Err(e)) => return Poll::Ready(Err(e)),
                        _ => unreachable!("the state was an error"),
                    },
                    None => return Poll::Ready(Err(Error::Disconnected(format!("{method} was already answered")))),
                };
                self.state = None;
                Poll::Ready(reply.and_then(|body| {
                    serde_json::from_slice(&body)
                        .map_err(|e| Error::Protocol(format!("unreadable {method} answer: {e}")))
                }))
            }
        }

        fn start<P: Serialize, T>(
            conn: &std::sync::Arc<crate::driver::Connection>,
            method: &'static str,
            params: P,
            session_id: Option<&str>,
        ) -> RpcFuture<T> {
            let state = object(method, params).and_then(|mut params| {
                if let Some(id) = session_id {
                    params.insert("sessionId".into(), id.into());
                }
                conn.request(method, &params, Instant::now() + conn.deadlines.request)
            });
            RpcFuture { state: Some(state), method, result: PhantomData }
        }

        impl RpcCaller for Client {
            type Call<T: DeserializeOwned> = RpcFuture<T>;

            fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> RpcFuture<T> {
                start(self.blocking().conn(), method, params, None)
            }
        }

        impl RpcCaller for Session {
            type Call<T: DeserializeOwned> = RpcFuture<T>;

            fn call<P: Serialize, T: DeserializeOwned>(&self, method: &'static str, params: P) -> RpcFuture<T> {
                start(&self.blocking().conn, method, params, Some(self.id()))
            }
        }

        impl Client {
            /// The CLI's server methods as typed calls, awaited:
            /// `client.rpc().models().list(params).await`.
            pub fn rpc(&self) -> ServerApi<'_, Client> {
                ServerApi(self)
            }
        }

        impl Session {
            /// The CLI's session methods as typed calls, awaited, this
            /// session's id filled in.
            pub fn rpc(&self) -> SessionApi<'_, Session> {
                SessionApi(self)
            }
        }
    }
}

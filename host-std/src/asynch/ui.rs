//! The async [`SessionUi`]: the UI calls of an async session, awaiting the
//! futures that the blocking [`crate::SessionUi`] waits on.

use std::time::Duration;

use serde_json::Value;

use crate::answering::ElicitationResponse;
use crate::api::session::SessionOps;
use crate::error::Result;
use crate::UiInputOptions;

/// The UI calls of an async session ([`Session::ui`](super::Session::ui));
/// see [`crate::SessionUi`]: each fails with
/// [`Error::MissingCapability`](crate::Error::MissingCapability) before
/// anything is sent when the session lacks the elicitation capability.
#[derive(Debug, Clone, Copy)]
pub struct SessionUi<'a> {
    pub(super) session: &'a crate::Session,
    pub(super) timeout: Option<Duration>,
}

impl SessionUi<'_> {
    fn ops(&self) -> SessionOps<'_> {
        self.session.ops(self.timeout)
    }

    /// See [`crate::SessionUi::elicitation`].
    pub async fn elicitation(&self, message: &str, requested_schema: Value) -> Result<ElicitationResponse> {
        self.ops().ui_elicitation(message, requested_schema).await
    }

    /// See [`crate::SessionUi::confirm`].
    pub async fn confirm(&self, message: &str) -> Result<bool> {
        self.ops().ui_confirm(message).await
    }

    /// See [`crate::SessionUi::select`].
    pub async fn select<S: AsRef<str>>(&self, message: &str, options: &[S]) -> Result<Option<String>> {
        self.ops().ui_select(message, options).await
    }

    /// See [`crate::SessionUi::input`].
    pub async fn input(&self, message: &str, options: Option<&UiInputOptions>) -> Result<Option<String>> {
        self.ops().ui_input(message, options).await
    }
}

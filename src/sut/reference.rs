//! [`ReferenceSut`]: the in-process adapter for the `rewind-reference` crate.
//!
//! It calls the same [`ReferenceDriver`] the reference server serves over HTTP, with the same
//! wire types, so an in-process run and an HTTP run of the reference differ only in transport.
//!
//! [`VARIANT_ENV`] (`REWIND_REFERENCE_VARIANT`) picks the reference's variant: `recommended`
//! (the default) or `alternative`, the other defensible reading wherever the spec leaves a
//! choice open. Any other value fails the handshake with an error naming the variable.

use async_trait::async_trait;
use rewind_driver_protocol::DriverError;
use rewind_reference::driver::{ReferenceDriver, Session};
use rewind_reference::Variant;

use super::{
    AttachRequest, ConversationApi, DeliverRequest, DeliveryReport, PruneRequest, ReadAnswer,
    ReadRequest, ReadState, RealtimeEvent, RewindRequest, RewindResponse, SendMessage, SentMessage,
    SutError, SyncPage, SyncRequest, SystemUnderTest,
};

const NAME: &str = "reference";

/// The environment variable that picks the reference's variant.
pub const VARIANT_ENV: &str = "REWIND_REFERENCE_VARIANT";

/// The variant `value` of [`VARIANT_ENV`] names (unset or empty: the default).
pub fn variant_from_env(value: Option<&str>) -> Result<Variant, String> {
    match value {
        None | Some("") => Ok(Variant::default()),
        Some(text) => text.parse().map_err(|_| {
            format!("{VARIANT_ENV} is `{text}`, which is neither `recommended` nor `alternative`")
        }),
    }
}

/// The reference implementation, called directly.
#[derive(Debug, Clone)]
pub struct ReferenceSut {
    /// The deployment, or why `REWIND_REFERENCE_VARIANT` names none (reported by the handshake
    /// and by every attach).
    driver: Result<ReferenceDriver, String>,
}

impl Default for ReferenceSut {
    fn default() -> Self {
        ReferenceSut {
            driver: Ok(ReferenceDriver::default()),
        }
    }
}

impl ReferenceSut {
    /// The reference, restoring only `runtimes` (`None`: all it knows), in the variant
    /// [`VARIANT_ENV`] names.
    pub fn new(runtimes: Option<Vec<String>>) -> Self {
        let value = std::env::var_os(VARIANT_ENV).map(|v| v.to_string_lossy().into_owned());
        Self::with_variant(runtimes, variant_from_env(value.as_deref()))
    }

    /// The reference, restoring only `runtimes`, in `variant` (an error is reported by the
    /// handshake and by every attach).
    pub fn with_variant(runtimes: Option<Vec<String>>, variant: Result<Variant, String>) -> Self {
        ReferenceSut {
            driver: variant.map(|variant| ReferenceDriver {
                supported_runtimes: runtimes,
                variant,
            }),
        }
    }

    fn driver(&self) -> Result<&ReferenceDriver, SutError> {
        self.driver.as_ref().map_err(|detail| SutError::Internal {
            sut: NAME.to_owned(),
            detail: detail.clone(),
        })
    }
}

#[async_trait]
impl SystemUnderTest for ReferenceSut {
    fn name(&self) -> &str {
        NAME
    }

    async fn handshake(&self) -> Result<rewind_driver_protocol::Implementation, SutError> {
        let driver = self.driver()?;
        tracing::debug!(variant = %driver.variant, "reference variant");
        Ok(driver.implementation())
    }

    async fn attach(&self, request: &AttachRequest) -> Result<Box<dyn ConversationApi>, SutError> {
        let session = self
            .driver()?
            .attach(request)
            .await
            .map_err(|e| SutError::Attach {
                sut: NAME.to_owned(),
                database: request.database.name.clone(),
                detail: e.error.message,
            })?;
        Ok(Box::new(ReferenceApi { session }))
    }
}

struct ReferenceApi {
    session: Session,
}

/// A driver error as its HTTP status would classify it: `bad_request` is a rejected request
/// (400 over HTTP), anything else a failure (5xx).
fn internal(error: DriverError) -> SutError {
    let sut = NAME.to_owned();
    let detail = format!("{} ({})", error.error.message, error.error.code);
    match error.error.code.as_str() {
        "bad_request" => SutError::Rejected { sut, detail },
        _ => SutError::Internal { sut, detail },
    }
}

#[async_trait]
impl ConversationApi for ReferenceApi {
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError> {
        self.session.rewind(request).await.map_err(internal)
    }

    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError> {
        self.session.send_message(message).await.map_err(internal)
    }

    async fn deliver(&self, request: &DeliverRequest) -> Result<DeliveryReport, SutError> {
        self.session.deliver(request).await.map_err(internal)
    }

    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError> {
        self.session
            .prune_recovery_points(request)
            .await
            .map(|p| p.pruned_ids)
            .map_err(internal)
    }

    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError> {
        self.session
            .read_state(scope_id, user_id)
            .await
            .map(|a| a.read_state)
            .map_err(internal)
    }

    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError> {
        self.session.sync_messages(request).await.map_err(internal)
    }

    async fn read(&self, request: &ReadRequest) -> Result<ReadAnswer, SutError> {
        self.session.read(request).await.map_err(internal)
    }

    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError> {
        Ok(self.session.take_events().events)
    }

    async fn detach(&self) -> Result<(), SutError> {
        self.session.detach().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_comes_from_the_environment_value() {
        assert_eq!(variant_from_env(None), Ok(Variant::Recommended));
        assert_eq!(variant_from_env(Some("")), Ok(Variant::Recommended));
        assert_eq!(
            variant_from_env(Some("recommended")),
            Ok(Variant::Recommended)
        );
        assert_eq!(
            variant_from_env(Some("alternative")),
            Ok(Variant::Alternative)
        );
        let err = variant_from_env(Some("alt")).unwrap_err();
        assert!(err.contains(VARIANT_ENV) && err.contains("`alt`"), "{err}");
    }

    #[tokio::test]
    async fn a_bad_variant_fails_the_handshake_with_the_variable_and_value() {
        let sut = ReferenceSut::with_variant(None, variant_from_env(Some("sideways")));
        let err = sut.handshake().await.unwrap_err().to_string();
        assert!(
            err.contains("REWIND_REFERENCE_VARIANT") && err.contains("`sideways`"),
            "{err}"
        );
        let ok = ReferenceSut::with_variant(None, Ok(Variant::Alternative));
        assert_eq!(
            ok.handshake().await.expect("handshake").name,
            "reference-alternative"
        );
    }
}

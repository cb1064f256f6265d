//! [`ReferenceSut`]: the in-process adapter for the `rewind-reference` crate.
//!
//! It calls the same [`ReferenceDriver`] the reference server serves over HTTP, with the same
//! wire types, so an in-process run and an HTTP run of the reference differ only in transport.

use async_trait::async_trait;
use rewind_driver_protocol::DriverError;
use rewind_reference::driver::{ReferenceDriver, Session};

use super::{
    AttachRequest, ConversationApi, PruneRequest, ReadState, RealtimeEvent, RewindRequest,
    RewindResponse, SendMessage, SentMessage, SutError, SyncPage, SyncRequest, SystemUnderTest,
};

const NAME: &str = "reference";

/// The reference implementation, called directly.
#[derive(Debug, Default, Clone)]
pub struct ReferenceSut {
    driver: ReferenceDriver,
}

impl ReferenceSut {
    /// The reference, restoring only `runtimes` (`None`: all it knows).
    pub fn new(runtimes: Option<Vec<String>>) -> Self {
        ReferenceSut {
            driver: ReferenceDriver {
                supported_runtimes: runtimes,
            },
        }
    }
}

#[async_trait]
impl SystemUnderTest for ReferenceSut {
    fn name(&self) -> &str {
        NAME
    }

    async fn handshake(&self) -> Result<rewind_driver_protocol::Implementation, SutError> {
        Ok(ReferenceDriver::implementation())
    }

    async fn attach(&self, request: &AttachRequest) -> Result<Box<dyn ConversationApi>, SutError> {
        let session = self
            .driver
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

fn internal(error: DriverError) -> SutError {
    SutError::Internal {
        sut: NAME.to_owned(),
        detail: format!("{} ({})", error.error.message, error.error.code),
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

    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError> {
        Ok(self.session.take_events().events)
    }

    async fn detach(&self) -> Result<(), SutError> {
        self.session.detach().await;
        Ok(())
    }
}

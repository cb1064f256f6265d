//! [`Violations`]: the protocol violations one scenario's implementation handle produced.
//!
//! A protocol violation (an answer that is not JSON, off the schema, or with a status the
//! endpoint never answers with) is reported apart from conformance failures: the scenario did
//! not get far enough to judge the implementation. Every call a scenario makes goes through
//! [`Violations::watch`]'s wrapper, which notes such errors as they pass.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rewind_conformance::sut::{
    ConversationApi, DeliverRequest, DeliveryReport, PruneRequest, ReadAnswer, ReadRequest,
    ReadState, RealtimeEvent, RewindRequest, RewindResponse, SendMessage, SentMessage, SutError,
    SyncPage, SyncRequest,
};

/// The protocol violations seen in one scenario, shared with its implementation handle.
#[derive(Debug, Clone, Default)]
pub struct Violations(Arc<Mutex<Vec<String>>>);

impl Violations {
    /// Notes `error` if it is a protocol violation, and hands it back.
    pub fn note(&self, error: SutError) -> SutError {
        if error.is_protocol_violation() {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(error.to_string());
        }
        error
    }

    /// The violations noted so far.
    pub fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Wraps a freshly attached handle so that every call's violations are noted here (and
    /// notes the attach's own).
    pub fn watch(
        &self,
        attached: Result<Box<dyn ConversationApi>, SutError>,
    ) -> Result<Arc<dyn ConversationApi>, SutError> {
        match attached {
            Ok(inner) => Ok(Arc::new(Watched {
                inner,
                violations: self.clone(),
            })),
            Err(e) => Err(self.note(e)),
        }
    }
}

struct Watched {
    inner: Box<dyn ConversationApi>,
    violations: Violations,
}

impl Watched {
    fn seen<T>(&self, result: Result<T, SutError>) -> Result<T, SutError> {
        result.map_err(|e| self.violations.note(e))
    }
}

#[async_trait]
impl ConversationApi for Watched {
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError> {
        self.seen(self.inner.rewind(request).await)
    }

    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError> {
        self.seen(self.inner.send_message(message).await)
    }

    async fn deliver(&self, request: &DeliverRequest) -> Result<DeliveryReport, SutError> {
        self.seen(self.inner.deliver(request).await)
    }

    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError> {
        self.seen(self.inner.prune_recovery_points(request).await)
    }

    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError> {
        self.seen(self.inner.read_state(scope_id, user_id).await)
    }

    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError> {
        self.seen(self.inner.sync_messages(request).await)
    }

    async fn read(&self, request: &ReadRequest) -> Result<ReadAnswer, SutError> {
        self.seen(self.inner.read(request).await)
    }

    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError> {
        self.seen(self.inner.take_events().await)
    }

    async fn detach(&self) -> Result<(), SutError> {
        self.seen(self.inner.detach().await)
    }
}

//! The system-under-test contract: [`SystemUnderTest`] makes a [`ConversationApi`] per scenario.
//!
//! The spec's tables are normative, so the database is shared: the harness seeds fixture state
//! into a scenario's database and inspects it afterwards, and the implementation under test works
//! on that same database. Everything else goes through these two traits, whose requests and
//! answers are the driver protocol's wire types ([`rewind_driver_protocol`]). Steps never name a
//! concrete implementation; adapters live in submodules: [`reference`] in process, [`http`] for
//! any server that speaks the protocol.

pub mod http;
pub mod reference;

use async_trait::async_trait;
pub use rewind_driver_protocol::{
    Actor, AttachRequest, DatabaseTarget, DeliverRequest, Delivery, DeliveryOutcome,
    DeliveryReport, EventBatch, Limits, PruneRequest, PrunedPoints, ReadAnswer, ReadMessage,
    ReadRejection, ReadRequest, ReadState, ReadStateAnswer, ReadSurface, RealtimeEvent,
    RewindRequest, RewindResponse, RuntimeEndpoints, SendMessage, SentMessage, SyncPage,
    SyncRequest, SyncedMessage,
};

/// A failure of the harness/implementation plumbing, as opposed to a conformance outcome.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SutError {
    /// The implementation could not be attached to the scenario database.
    #[error("cannot attach `{sut}` to database `{database}`: {detail}")]
    Attach {
        /// The implementation's name.
        sut: String,
        /// The scenario database.
        database: String,
        /// What went wrong.
        detail: String,
    },
    /// The implementation rejected the request as bad input: a clear `DriverError` of the
    /// client-error kind (`400 bad_request` and its kin), not a failure of its own.
    #[error("`{sut}` rejected the request: {detail}")]
    Rejected {
        /// The implementation's name.
        sut: String,
        /// The call, the status where there is one, the message and the code.
        detail: String,
    },
    /// The implementation failed in a way the contract does not allow (not a spec refusal).
    #[error("`{sut}` failed outside the contract: {detail}")]
    Internal {
        /// The implementation's name.
        sut: String,
        /// What went wrong.
        detail: String,
    },
    /// The implementation answered `call` with something the protocol does not allow: not
    /// JSON, off the schema, or a status that is neither success nor error (1xx, 3xx).
    #[error("protocol violation in `{call}`: {detail}\n  body: {body}")]
    Protocol {
        /// The call (`POST /v1/sessions/{id}/rewind`).
        call: String,
        /// What is wrong with the answer.
        detail: String,
        /// The offending body, as received (shortened when long).
        body: String,
    },
    /// `call` got no answer: the server refused the connection, closed it, or did not answer in
    /// time.
    #[error("`{call}` got no answer: {detail}")]
    Transport {
        /// The call.
        call: String,
        /// What happened.
        detail: String,
    },
}

impl SutError {
    /// Whether this is a protocol violation (reported apart from conformance failures).
    pub fn is_protocol_violation(&self) -> bool {
        matches!(self, SutError::Protocol { .. })
    }
}

/// A factory for per-scenario handles on one implementation.
#[async_trait]
pub trait SystemUnderTest: Send + Sync {
    /// A short name for reports.
    fn name(&self) -> &str;

    /// Checks, once before any scenario runs, that the implementation can be driven at all
    /// (for a server: it answers the handshake with this protocol and version).
    async fn handshake(&self) -> Result<rewind_driver_protocol::Implementation, SutError>;

    /// Points the implementation at one scenario's database and mock runtimes.
    async fn attach(&self, request: &AttachRequest) -> Result<Box<dyn ConversationApi>, SutError>;
}

/// The operations a scenario drives. Implementations must answer a spec refusal with
/// [`RewindResponse::Refused`] (not an error) and leave the database unchanged when they do.
#[async_trait]
pub trait ConversationApi: Send + Sync {
    /// Asks for a rewind.
    async fn rewind(&self, request: &RewindRequest) -> Result<RewindResponse, SutError>;

    /// Appends a message in live mode (publishing its `message.created`).
    async fn send_message(&self, message: &SendMessage) -> Result<SentMessage, SutError>;

    /// Delivers a message to the agent runtimes it reaches, as the implementation's daemon
    /// would (recovery point first, then the runtime's turn, then the answer posted back), and
    /// waits until every delivery has finished.
    async fn deliver(&self, request: &DeliverRequest) -> Result<DeliveryReport, SutError>;

    /// Prunes recovery points as the server's GC would; returns the pruned point ids.
    async fn prune_recovery_points(&self, request: &PruneRequest) -> Result<Vec<String>, SutError>;

    /// The read state of human `user_id` in `scope_id` (`None`: not a member).
    async fn read_state(
        &self,
        scope_id: &str,
        user_id: &str,
    ) -> Result<Option<ReadState>, SutError>;

    /// A page of message sync.
    async fn sync_messages(&self, request: &SyncRequest) -> Result<SyncPage, SutError>;

    /// One read through one of the spec's read surfaces.
    async fn read(&self, request: &ReadRequest) -> Result<ReadAnswer, SutError>;

    /// Takes the realtime events published since the last call, in publication order.
    async fn take_events(&self) -> Result<Vec<RealtimeEvent>, SutError>;

    /// Releases what the handle holds (connections); called at the end of each scenario.
    async fn detach(&self) -> Result<(), SutError>;
}

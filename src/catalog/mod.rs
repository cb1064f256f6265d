//! The rule catalog ([`Catalog`]), the rules no black-box scenario can check ([`Untestable`]),
//! the rules waiting for a piece of harness work ([`Pending`]), the coverage ([`Coverage`]) that
//! ties Gherkin scenarios to the catalog through `@rule:<id>` tags, the coverage gate ([`Gate`])
//! over all of them and the shipped fixtures, and the ambiguity register ([`Register`]) that
//! names what the spec leaves open and which readings the steps accept (`@ambiguity:<id>` tags).

mod ambiguities;
mod coverage;
mod gate;
mod listed;
mod pending;
mod rules;
mod untestable;

pub use ambiguities::{Ambiguity, Policy, Reading, Register, RegisterError, AMBIGUITY_TAG_PREFIX};
pub use coverage::{scan_features, Coverage, FeatureScan, FixtureUse, RuleTag, StepUse};
pub use gate::{fixture_files, FixtureFile, Gate};
pub use pending::{Pending, PendingRule};
pub use rules::{Catalog, CatalogError, Rule, RuleKind, RuleLocation, RuleSide};
pub use untestable::{Untestable, UntestableRule};

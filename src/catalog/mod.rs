//! The rule catalog ([`Catalog`]), the rules no black-box scenario can check ([`Untestable`]),
//! and the coverage gate ([`Coverage`]) that ties Gherkin scenarios to the catalog through
//! `@rule:<id>` tags, and the ambiguity register ([`Register`]) that names what the spec leaves
//! open and which readings the steps accept (`@ambiguity:<id>` tags).

mod ambiguities;
mod coverage;
mod rules;
mod untestable;

pub use ambiguities::{Ambiguity, Policy, Reading, Register, RegisterError, AMBIGUITY_TAG_PREFIX};
pub use coverage::{scan_features, Coverage, FeatureScan, RuleTag};
pub use rules::{Catalog, CatalogError, Rule, RuleKind, RuleSide};
pub use untestable::{Untestable, UntestableRule};

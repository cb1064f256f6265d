//! The rule catalog ([`Catalog`]), the rules no black-box scenario can check ([`Untestable`]),
//! and the coverage gate ([`Coverage`]) that ties Gherkin scenarios to the catalog through
//! `@rule:<id>` tags.

mod coverage;
mod rules;
mod untestable;

pub use coverage::{scan_features, Coverage, FeatureScan, RuleTag};
pub use rules::{Catalog, CatalogError, Rule, RuleKind, RuleSide};
pub use untestable::{Untestable, UntestableRule};

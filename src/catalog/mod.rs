//! The rule catalog ([`Catalog`]) and the coverage gate ([`Coverage`]) that ties Gherkin
//! scenarios to it through `@rule:<id>` tags.

mod coverage;
mod rules;

pub use coverage::{scan_features, Coverage, FeatureScan, RuleTag};
pub use rules::{Catalog, CatalogError, Rule, RuleKind, RuleSide};

//! [`Contract`]: the OpenAPI document of the driver protocol, and validation against it.
//!
//! The document (`driver-v1.openapi.json`, embedded here) is what implementers read. Its
//! `components.schemas` must equal what the wire types of this crate generate
//! ([`generated_components`]); `cargo test -p rewind-driver-protocol` fails when they differ, and
//! `REWIND_BLESS=1` rewrites the components from the types (the paths are written by hand).

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// The OpenAPI 3.1 document, as shipped.
pub const DOCUMENT: &str = include_str!("../driver-v1.openapi.json");

/// Where the document lives, relative to this crate's root.
pub const DOCUMENT_FILE: &str = "driver-v1.openapi.json";

/// A JSON value that does not match the schema it was checked against.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("does not match schema `{component}`: {}", .problems.join("; "))]
pub struct SchemaViolation {
    /// The component schema (`RewindResponse`).
    pub component: String,
    /// Each problem, with its JSON pointer in the value.
    pub problems: Vec<String>,
}

/// The parsed document, with a compiled validator per component schema.
pub struct Contract {
    document: Value,
    validators: Mutex<BTreeMap<String, std::sync::Arc<jsonschema::Validator>>>,
}

static CONTRACT: LazyLock<Result<Contract, String>> = LazyLock::new(|| {
    serde_json::from_str::<Value>(DOCUMENT)
        .map(|document| Contract {
            document,
            validators: Mutex::new(BTreeMap::new()),
        })
        .map_err(|e| format!("{DOCUMENT_FILE} is not JSON: {e}"))
});

impl Contract {
    /// The shipped document. It is embedded at build time, so an error here means the crate was
    /// built from a broken file (the crate's tests catch that).
    pub fn get() -> Result<&'static Contract, String> {
        CONTRACT.as_ref().map_err(Clone::clone)
    }

    /// The whole document.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// The component schemas, by name.
    pub fn components(&self) -> Option<&Map<String, Value>> {
        self.document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
    }

    /// Checks `value` against component schema `component` (e.g. `RewindResponse`).
    pub fn validate(&self, component: &str, value: &Value) -> Result<(), SchemaViolation> {
        let validator = self.validator(component).map_err(|e| SchemaViolation {
            component: component.to_owned(),
            problems: vec![e],
        })?;
        let problems: Vec<String> = validator
            .iter_errors(value)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at `{at}`: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SchemaViolation {
                component: component.to_owned(),
                problems,
            })
        }
    }

    fn validator(&self, component: &str) -> Result<std::sync::Arc<jsonschema::Validator>, String> {
        let mut cache = self
            .validators
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(v) = cache.get(component) {
            return Ok(v.clone());
        }
        if self.components().and_then(|c| c.get(component)).is_none() {
            return Err(format!(
                "{DOCUMENT_FILE} has no component schema `{component}`"
            ));
        }
        // The component is checked as a reference into the whole document, so that its own
        // references to other components resolve.
        let root = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/components/schemas/{component}"),
            "components": self.document.get("components").cloned().unwrap_or(Value::Null),
        });
        let validator = jsonschema::validator_for(&root)
            .map_err(|e| format!("component schema `{component}` does not compile: {e}"))?;
        let validator = std::sync::Arc::new(validator);
        cache.insert(component.to_owned(), validator.clone());
        Ok(validator)
    }
}

/// The name of `T`'s component schema.
pub fn component_name<T: JsonSchema>() -> String {
    T::schema_name().into_owned()
}

/// The component schemas the wire types generate, as they must appear in the document.
pub fn generated_components() -> Map<String, Value> {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    macro_rules! add {
        ($($t:ty),* $(,)?) => { $( let _ = generator.subschema_for::<$t>(); )* };
    }
    use crate::*;
    add!(
        Handshake,
        AttachRequest,
        Session,
        RewindRequest,
        RewindResponse,
        SendMessage,
        SentMessage,
        DeliverRequest,
        DeliveryReport,
        PruneRequest,
        PrunedPoints,
        ReadStateAnswer,
        SyncRequest,
        SyncPage,
        ReadRequest,
        ReadAnswer,
        EventBatch,
        DriverError,
    );
    generator.take_definitions(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document_path() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOCUMENT_FILE)
    }

    /// The document's components are exactly what the wire types generate.
    #[test]
    fn the_document_and_the_wire_types_agree() {
        let generated = Value::Object(generated_components());
        let mut document: Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
        let shipped = document
            .pointer("/components/schemas")
            .cloned()
            .unwrap_or(Value::Null);
        if shipped == generated {
            return;
        }
        if std::env::var_os("REWIND_BLESS").is_some() {
            document["components"]["schemas"] = generated;
            let text = serde_json::to_string_pretty(&document).expect("serialisable") + "\n";
            std::fs::write(document_path(), text).expect("writing the document");
            return;
        }
        similar_asserts::assert_eq!(
            shipped: serde_json::to_string_pretty(&shipped).unwrap_or_default(),
            generated: serde_json::to_string_pretty(&generated).unwrap_or_default(),
            "{DOCUMENT_FILE}'s components differ from the wire types (run with REWIND_BLESS=1 \
             to rewrite them from the types, then review the diff)"
        );
    }

    /// Every `$ref` in the document points at a component that exists, and every path's
    /// request and response bodies name components.
    #[test]
    fn every_reference_resolves() {
        let contract = Contract::get().expect("the document parses");
        let components = contract.components().expect("components.schemas");
        let mut refs = Vec::new();
        collect_refs(contract.document(), &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("`{r}` is not a component reference"));
            assert!(components.contains_key(name), "dangling reference `{r}`");
        }
    }

    fn collect_refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "$ref" {
                        if let Some(s) = v.as_str() {
                            out.push(s.to_owned());
                        }
                    }
                    collect_refs(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }

    /// Every example in the document validates against its schema and round-trips through the
    /// wire type of that schema.
    #[test]
    fn every_example_validates() {
        let contract = Contract::get().expect("the document parses");
        let mut checked = 0;
        let paths = contract.document()["paths"].as_object().expect("paths");
        for (path, item) in paths {
            for (method, op) in item.as_object().into_iter().flatten() {
                let bodies = op
                    .pointer("/requestBody/content/application~1json")
                    .into_iter()
                    .chain(
                        op["responses"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter_map(|(_, r)| r.pointer("/content/application~1json")),
                    );
                for body in bodies {
                    let Some(component) = body
                        .pointer("/schema/$ref")
                        .and_then(Value::as_str)
                        .and_then(|r| r.strip_prefix("#/components/schemas/"))
                    else {
                        continue;
                    };
                    for (name, example) in body["examples"].as_object().into_iter().flatten() {
                        let value = &example["value"];
                        if let Err(e) = contract.validate(component, value) {
                            panic!("{method} {path}, example `{name}`: {e}");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 10, "only {checked} examples were found");
    }

    #[test]
    fn off_schema_values_are_violations() {
        let contract = Contract::get().expect("the document parses");
        let bad = serde_json::json!({"outcome": "refused", "message": 5});
        let err = contract
            .validate("RewindResponse", &bad)
            .expect_err("a number is no message");
        assert_eq!(err.component, "RewindResponse");
        let good = serde_json::to_value(crate::RewindResponse::Refused {
            code: "x".into(),
            message: "y".into(),
            operation_id: None,
        })
        .expect("serialisable");
        contract.validate("RewindResponse", &good).expect("valid");
        assert!(contract.validate("NoSuchThing", &good).is_err());
    }
}

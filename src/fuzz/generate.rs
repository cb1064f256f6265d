//! The generator's entry points: case `index` of run `seed`, regenerated exactly from those two
//! numbers, and the shrink tree behind it.
//!
//! Each case draws its [`Recipe`](super::recipe::Recipe) from a ChaCha generator seeded with
//! `(seed, index)` alone, so cases are independent of each other and of the order they are
//! asked for. The returned [`CaseTree`] is proptest's value tree of that draw:
//! [`ValueTree::simplify`] and [`ValueTree::complicate`] walk it, and every value along the way
//! is again a valid case (the recipe only holds choices; any recipe builds a valid case). The
//! tree records the walk ([`CaseTree::path`]), so [`replay`] rebuilds any case along it.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rewind_driver_protocol::RewindRequest;

use super::build::build;
use super::model::CaseModel;
use super::recipe::{recipe, GenConfig, Recipe};
use super::render::render_fixture;
use super::shape::Shape;

/// One generated case: the fixture and the rewind to ask of it.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedCase {
    /// The run's seed.
    pub seed: u64,
    /// The case's index in the run.
    pub index: u64,
    /// The fixture name (the file stem to save `yaml` under), unique per seed and index.
    pub name: String,
    /// The fixture YAML.
    pub yaml: String,
    /// The rewind to ask for.
    pub request: RewindRequest,
    /// What the case is made of.
    pub shape: Shape,
    /// The model the YAML was rendered from.
    pub model: CaseModel,
}

/// The fixture name of case `index` of run `seed`.
pub fn case_name(seed: u64, index: u64) -> String {
    format!("gen-g{seed:x}-{index}")
}

/// The random generator case `index` of run `seed` draws from.
pub fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..].copy_from_slice(b"rewind-fuzz-case");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

fn generated(
    config: &GenConfig,
    seed: u64,
    index: u64,
    recipe: &Recipe,
    path: &str,
) -> GeneratedCase {
    let mut model = build(seed, index, recipe);
    model.config = config.clone();
    model.shrink_path = path.to_owned();
    let name = case_name(seed, index);
    let yaml = render_fixture(&model, &name);
    GeneratedCase {
        seed,
        index,
        name,
        yaml,
        request: model.request.clone(),
        shape: model.shape.clone(),
        model,
    }
}

/// The strategy of case `index` of run `seed`: cases of `config`'s size whose canaries carry
/// the seed and index. Drawn with [`case_rng`]`(seed, index)`, it gives [`case_with`]'s case.
pub fn case_strategy(
    config: &GenConfig,
    seed: u64,
    index: u64,
) -> impl Strategy<Value = GeneratedCase> {
    let config_of_case = config.clone();
    recipe(config).prop_map(move |recipe| generated(&config_of_case, seed, index, &recipe, ""))
}

/// The shrink tree of one case; its [`ValueTree::current`] is a [`GeneratedCase`].
pub struct CaseTree {
    config: GenConfig,
    seed: u64,
    index: u64,
    tree: Box<dyn ValueTree<Value = Recipe>>,
    /// Every call so far: `s` simplify, `c` complicate.
    calls: String,
}

impl std::fmt::Debug for CaseTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseTree")
            .field("seed", &self.seed)
            .field("index", &self.index)
            .field("path", &self.path())
            .finish_non_exhaustive()
    }
}

impl CaseTree {
    /// The walk so far, run-length encoded (`s12c1s3`: twelve calls to
    /// [`ValueTree::simplify`], one to [`ValueTree::complicate`], three to `simplify`); empty
    /// for the case as drawn. [`replay`] takes it back.
    pub fn path(&self) -> String {
        let mut out = String::new();
        let mut chars = self.calls.chars().peekable();
        while let Some(call) = chars.next() {
            let mut n = 1;
            while chars.peek() == Some(&call) {
                chars.next();
                n += 1;
            }
            out.push(call);
            out.push_str(&n.to_string());
        }
        out
    }
}

impl ValueTree for CaseTree {
    type Value = GeneratedCase;

    fn current(&self) -> GeneratedCase {
        generated(
            &self.config,
            self.seed,
            self.index,
            &self.tree.current(),
            &self.path(),
        )
    }

    fn simplify(&mut self) -> bool {
        self.calls.push('s');
        self.tree.simplify()
    }

    fn complicate(&mut self) -> bool {
        self.calls.push('c');
        self.tree.complicate()
    }
}

/// Case `index` of run `seed` with the default size ([`GenConfig::default`]), and its shrink
/// tree.
pub fn case(seed: u64, index: u64) -> (GeneratedCase, CaseTree) {
    case_with(&GenConfig::default(), seed, index)
}

/// Case `index` of run `seed` with the size knobs of `config`, and its shrink tree.
pub fn case_with(config: &GenConfig, seed: u64, index: u64) -> (GeneratedCase, CaseTree) {
    let mut runner = TestRunner::new_with_rng(Config::default(), case_rng(seed, index));
    // The strategies involved neither filter nor reject, so drawing cannot fail.
    let tree = match recipe(config).new_tree(&mut runner) {
        Ok(tree) => tree,
        Err(reason) => unreachable!("the case strategy rejects nothing: {reason}"),
    };
    let tree = CaseTree {
        config: config.clone(),
        seed,
        index,
        tree: Box::new(tree),
        calls: String::new(),
    };
    (tree.current(), tree)
}

/// The case reached by walking `path` ([`CaseTree::path`]) from case `index` of run `seed`,
/// and the tree there; `None` when `path` is not such a walk.
pub fn replay(
    config: &GenConfig,
    seed: u64,
    index: u64,
    path: &str,
) -> Option<(GeneratedCase, CaseTree)> {
    let (_, mut tree) = case_with(config, seed, index);
    let mut rest = path;
    while let Some(call) = rest.chars().next() {
        rest = &rest[1..];
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: usize = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        for _ in 0..n {
            match call {
                's' => tree.simplify(),
                'c' => tree.complicate(),
                _ => return None,
            };
        }
    }
    Some((tree.current(), tree))
}

//! Generates the typed session events and RPC types of `copilot-host` (Rust)
//! and of the npm package `copilot-wasm` (TypeScript declarations) from the
//! JSON schemas the Copilot CLI ships, vendored in `core/schemas/<version>/`.
//!
//! The output is committed; `cargo run -p copilot-codegen` rewrites it, and
//! this crate's test fails when the committed files differ from what the
//! schemas give, so a CLI bump shows up as a reviewable diff.
//!
//! Mapping, in short: objects with properties become structs (fields the
//! schema does not require become `Option`s), string enumerations become
//! enums with an `Unknown(String)` variant so a value a later CLI adds still
//! parses, `T | null` becomes `Option<T>`. In the API schema a union of
//! objects told apart by a string constant (`type`, `kind`, ...) becomes an
//! enum on it with an `Unknown(Value)` variant; whatever is too loose to
//! type well (other unions, opaque JSON, schemas without a type) stays a
//! `serde_json::Value`. Properties are emitted in name order, so the output
//! does not depend on how the JSON parser orders object keys.
//!
//! Besides the types: every method a client calls becomes a typed call,
//! grouped as the CLI names it (`ServerApi`/`SessionApi` over
//! `copilot_host::rpc::RpcCaller` in Rust; `client.rpc`/`session.rpc` in
//! the npm package, a list of names and one builder in `src/generated/rpc.js`
//! with the types in the d.ts). The RPC types derive serde only in the
//! direction they cross the wire, and the few every build needs (model
//! list, attachments, model and agent selection) go to `rpc_core.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The CLI version whose schemas are vendored and generated from.
pub const CLI_VERSION: &str = "1.0.102";

/// The schema folder, relative to the workspace root.
pub fn schema_dir() -> PathBuf {
    Path::new("core/schemas").join(CLI_VERSION)
}

/// One generated file: its path relative to the workspace root, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Path relative to the workspace root.
    pub path: PathBuf,
    /// The whole file.
    pub text: String,
}

/// Counts of what was generated, for the report the binary prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Session event types of the schema (each has a typed variant).
    pub event_types: usize,
    /// Event types seen on the wire but not in the schema, with a variant
    /// whose data is JSON.
    pub observed_event_types: usize,
    /// Types generated for the events (structs and enums).
    pub event_type_defs: usize,
    /// RPC methods with typed params and result, per namespace.
    pub methods: BTreeMap<String, usize>,
    /// Types generated for the RPC methods.
    pub rpc_type_defs: usize,
    /// Methods with a typed call (on a client: `server`; on a session:
    /// `session`), in Rust and in the npm package alike.
    pub calls: BTreeMap<String, usize>,
}

/// Reads the two schemas under `root` and returns every generated file.
pub fn generate(root: &Path) -> Result<(Vec<Output>, Counts), String> {
    let dir = root.join(schema_dir());
    let read = |name: &str| -> Result<Value, String> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let events_schema = read("session-events.schema.json")?;
    let api_schema = read("api.schema.json")?;
    let mut counts = Counts::default();

    let events = events::build(&events_schema)?;
    counts.event_types = events.variants.len() - events::OBSERVED.len();
    counts.observed_event_types = events::OBSERVED.len();
    counts.event_type_defs = events.model.defs.len();
    let rpc = rpc::build(&api_schema)?;
    for m in &rpc.methods {
        *counts.methods.entry(m.namespace.clone()).or_default() += 1;
    }
    counts.rpc_type_defs = rpc.model.defs.len();
    for ns in ["server", "session"] {
        counts.calls.insert(ns.to_owned(), rpc::call_count(&rpc::tree(&rpc, ns)?));
    }

    let outputs = vec![
        Output { path: "host-std/src/generated/events.rs".into(), text: events::rust(&events) },
        Output { path: "host-std/src/generated/rpc_core.rs".into(), text: rpc::rust_core(&rpc) },
        Output { path: "host-std/src/generated/rpc.rs".into(), text: rpc::rust(&rpc)? },
        Output { path: "wasm/npm/types/generated/events.d.ts".into(), text: events::typescript(&events) },
        Output { path: "wasm/npm/types/generated/rpc.d.ts".into(), text: rpc::typescript(&rpc)? },
        Output { path: "wasm/npm/src/generated/rpc.js".into(), text: rpc::js_calls(&rpc) },
    ];
    Ok((outputs, counts))
}

// ---------------------------------------------------------------------------
// The type model both languages are written from.

#[derive(Debug, Clone, PartialEq)]
enum Ty {
    String,
    Bool,
    U64,
    I64,
    F64,
    Value,
    Unit,
    Vec(Box<Ty>),
    Map(Box<Ty>),
    /// `T | null`.
    Nullable(Box<Ty>),
    Named(String),
}

#[derive(Debug, Clone)]
struct Field {
    wire: String,
    ident: String,
    ty: Ty,
    required: bool,
    doc: String,
    /// The field refers back to its own struct by value: boxed in Rust.
    boxed: bool,
}

#[derive(Debug, Clone)]
enum Def {
    Struct {
        doc: String,
        fields: Vec<Field>,
    },
    Enum {
        doc: String,
        values: Vec<(String, String, String)>,
    },
    /// Objects told apart by a string constant in `tag`; each variant's
    /// struct has every field but the tag.
    Union {
        doc: String,
        tag: String,
        variants: Vec<Variant>,
    },
}

/// One member of a [`Def::Union`].
#[derive(Debug, Clone)]
struct Variant {
    /// The tag's value.
    wire: String,
    ident: String,
    /// The struct of the member's other fields.
    ty: String,
    doc: String,
}

#[derive(Default)]
struct Model<'s> {
    definitions: Option<&'s Map<String, Value>>,
    /// Generated types by name.
    defs: BTreeMap<String, Def>,
    /// Definitions already resolved, by definition key.
    resolved: HashMap<String, Ty>,
    /// Names taken by definitions or by inline types.
    taken: BTreeSet<String>,
    /// Whether tagged unions get a type ([`Def::Union`]); otherwise they
    /// stay JSON.
    unions: bool,
}

fn description(schema: &Value) -> String {
    let d = schema.get("description").and_then(Value::as_str).unwrap_or("");
    d.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl<'s> Model<'s> {
    fn new(definitions: Option<&'s Map<String, Value>>) -> Self {
        let mut m = Model { definitions, ..Model::default() };
        if let Some(defs) = definitions {
            m.taken.extend(defs.keys().map(|k| pascal(k)));
        }
        m
    }

    /// A name for an inline type, unique among all types.
    fn fresh(&mut self, base: &str) -> String {
        let base = pascal(base);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }

    fn resolve_ref(&mut self, reference: &str) -> Result<Ty, String> {
        // The API schema refers to a few event types; they stay JSON there.
        if reference.starts_with("session-events.schema.json#") {
            return Ok(Ty::Value);
        }
        let key = reference.strip_prefix("#/definitions/").ok_or_else(|| format!("unsupported $ref {reference}"))?;
        if let Some(ty) = self.resolved.get(key) {
            return Ok(ty.clone());
        }
        let schema =
            self.definitions.and_then(|d| d.get(key)).ok_or_else(|| format!("$ref to a missing definition {key}"))?;
        let name = pascal(key);
        // Named before its contents are read, so a type that refers to
        // itself resolves.
        if names_a_type(schema, self.unions) {
            self.resolved.insert(key.to_owned(), Ty::Named(name.clone()));
        }
        let ty = self.resolve_as(schema, &name, true)?;
        self.resolved.insert(key.to_owned(), ty.clone());
        Ok(ty)
    }

    fn resolve(&mut self, schema: &'s Value, name_hint: &str) -> Result<Ty, String> {
        self.resolve_as(schema, name_hint, false)
    }

    // `is_definition`: `name` is the definition's own (already taken) name.
    fn resolve_as(&mut self, schema: &'s Value, name: &str, is_definition: bool) -> Result<Ty, String> {
        let Some(obj) = schema.as_object() else { return Ok(Ty::Value) };
        if obj.get("x-opaque-json") == Some(&Value::Bool(true)) {
            return Ok(Ty::Value);
        }
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            return self.resolve_ref(r);
        }
        if let Some(any) = obj.get("anyOf").and_then(Value::as_array) {
            // `{"not": {}}` matches nothing: a member that says "absent"
            // (optional params), not a type.
            let non_null: Vec<&Value> = any.iter().filter(|a| !is_null_schema(a) && !is_never_schema(a)).collect();
            let nullable = any.iter().any(is_null_schema);
            return Ok(match (non_null.as_slice(), nullable) {
                ([one], true) => nullable_of(self.resolve_as(one, name, is_definition)?),
                ([one], false) => self.resolve_as(one, name, is_definition)?,
                (members, _) if self.unions => match self.tagged_union(members, schema, name, is_definition)? {
                    Some(ty) if nullable => nullable_of(ty),
                    Some(ty) => ty,
                    None => Ty::Value,
                },
                _ => Ty::Value,
            });
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            let strings: Option<Vec<&str>> = values.iter().map(Value::as_str).collect();
            let Some(strings) = strings else { return Ok(Ty::Value) };
            let name = if is_definition { name.to_owned() } else { self.fresh(name) };
            let docs = obj.get("x-enumDescriptions");
            let mut idents = BTreeSet::new();
            let values = strings
                .iter()
                .map(|wire| {
                    let mut ident = variant_ident(wire);
                    let base = ident.clone();
                    let mut n = 2;
                    while !idents.insert(ident.clone()) || ident == "Unknown" {
                        ident = format!("{base}{n}");
                        n += 1;
                    }
                    let doc =
                        docs.and_then(|d| d.get(*wire)).map(|d| description(&serde_json::json!({"description": d})));
                    ((*wire).to_owned(), ident, doc.unwrap_or_default())
                })
                .collect();
            self.defs.insert(name.clone(), Def::Enum { doc: description(schema), values });
            return Ok(Ty::Named(name));
        }
        if obj.contains_key("const") {
            return Ok(match obj.get("const") {
                Some(Value::String(_)) => Ty::String,
                Some(Value::Bool(_)) => Ty::Bool,
                _ => Ty::Value,
            });
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.resolve_typed(obj, t, schema, name, is_definition),
            Some(Value::Array(types)) => {
                let non_null: Vec<&str> = types.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect();
                let nullable = non_null.len() < types.len();
                match (non_null.as_slice(), nullable) {
                    ([one], true) => Ok(nullable_of(self.resolve_typed(obj, one, schema, name, is_definition)?)),
                    ([one], false) => self.resolve_typed(obj, one, schema, name, is_definition),
                    _ => Ok(Ty::Value),
                }
            }
            _ => Ok(Ty::Value),
        }
    }

    fn resolve_typed(
        &mut self,
        obj: &'s Map<String, Value>,
        t: &str,
        schema: &'s Value,
        name: &str,
        is_definition: bool,
    ) -> Result<Ty, String> {
        Ok(match t {
            "string" => Ty::String,
            "boolean" => Ty::Bool,
            "integer" => {
                let min = obj.get("minimum").or_else(|| obj.get("exclusiveMinimum")).and_then(Value::as_f64);
                if min.is_some_and(|m| m >= 0.0) {
                    Ty::U64
                } else {
                    Ty::I64
                }
            }
            "number" => Ty::F64,
            "null" => Ty::Unit,
            "array" => match obj.get("items") {
                Some(items) if items.is_object() => Ty::Vec(Box::new(self.resolve(items, &format!("{name}Item"))?)),
                _ => Ty::Vec(Box::new(Ty::Value)),
            },
            "object" => match obj.get("properties").and_then(Value::as_object) {
                Some(props) if !props.is_empty() => {
                    let name = if is_definition { name.to_owned() } else { self.fresh(name) };
                    self.object(obj, props, schema, &name, None)?;
                    Ty::Named(name)
                }
                _ => match obj.get("additionalProperties") {
                    Some(ap @ Value::Object(_)) => {
                        let value = self.resolve(ap, &format!("{name}Value"))?;
                        if value == Ty::Value {
                            Ty::Value
                        } else {
                            Ty::Map(Box::new(value))
                        }
                    }
                    _ => Ty::Value,
                },
            },
            _ => Ty::Value,
        })
    }

    /// Generates the struct `name` of an object's properties, all but
    /// `skip` (a union's tag, which the union writes).
    fn object(
        &mut self,
        obj: &'s Map<String, Value>,
        props: &'s Map<String, Value>,
        schema: &'s Value,
        name: &str,
        skip: Option<&str>,
    ) -> Result<(), String> {
        // Reserved first, so nested inline types do not take it.
        self.defs.insert(name.to_owned(), Def::Struct { doc: String::new(), fields: Vec::new() });
        let required: BTreeSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut keys: Vec<&String> = props.keys().filter(|k| Some(k.as_str()) != skip).collect();
        keys.sort();
        let mut idents = BTreeSet::new();
        let mut fields = Vec::new();
        for key in keys {
            let prop = &props[key];
            let ty = self.resolve(prop, &format!("{name}{}", pascal(key)))?;
            let mut ident = field_ident(key);
            while !idents.insert(ident.clone()) {
                ident.push('_');
            }
            fields.push(Field {
                wire: key.clone(),
                ident,
                ty,
                required: required.contains(key.as_str()),
                doc: description(prop),
                boxed: false,
            });
        }
        self.defs.insert(name.to_owned(), Def::Struct { doc: description(schema), fields });
        Ok(())
    }

    /// A union of objects that all carry one property with a string
    /// constant (`type`, `kind`, ...) becomes a [`Def::Union`] on it;
    /// `None` for any other union (it stays JSON).
    fn tagged_union(
        &mut self,
        members: &[&'s Value],
        schema: &'s Value,
        name: &str,
        is_definition: bool,
    ) -> Result<Option<Ty>, String> {
        // Each member, its definition key (for a `$ref`) and its constants.
        let mut found = Vec::new();
        for member in members {
            let (key, target) = match member.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let Some(key) = r.strip_prefix("#/definitions/") else { return Ok(None) };
                    match self.definitions.and_then(|d| d.get(key)) {
                        Some(t) => (Some(key), t),
                        None => return Ok(None),
                    }
                }
                None => (None, *member),
            };
            let Some(obj) = target.as_object() else { return Ok(None) };
            let Some(props) = obj.get("properties").and_then(Value::as_object) else { return Ok(None) };
            if obj.get("type").and_then(Value::as_str) != Some("object") {
                return Ok(None);
            }
            let consts: BTreeMap<&str, &str> =
                props.iter().filter_map(|(k, v)| Some((k.as_str(), v.get("const")?.as_str()?))).collect();
            found.push((key, target, obj, props, consts, description(member)));
        }
        // The tag: a constant every member has, with a different value in
        // each (`type` or `kind` first when there is a choice).
        let mut candidates: Vec<&str> = found.first().map(|f| f.4.keys().copied().collect()).unwrap_or_default();
        candidates.sort_by_key(|k| (!matches!(*k, "type" | "kind"), *k));
        let tag = candidates.into_iter().find(|tag| {
            let values: Option<BTreeSet<&str>> = found.iter().map(|f| f.4.get(tag).copied()).collect();
            values.is_some_and(|v| v.len() == found.len())
        });
        let Some(tag) = tag else { return Ok(None) };
        let union = if is_definition { name.to_owned() } else { self.fresh(name) };
        self.defs.insert(union.clone(), Def::Union { doc: String::new(), tag: String::new(), variants: Vec::new() });
        let mut variants = Vec::new();
        let mut idents = BTreeSet::new();
        for (key, target, obj, props, consts, doc) in found {
            let wire = consts[tag].to_owned();
            let mut ident = variant_ident(&wire);
            while !idents.insert(ident.clone()) || ident == "Unknown" {
                ident.push('_');
            }
            let ty = match key {
                Some(key) => match self.resolved.get(key) {
                    // Already generated with its tag as a field: the union
                    // overwrites it with the same value.
                    Some(Ty::Named(n)) => n.clone(),
                    Some(_) => return Ok(None),
                    None => {
                        let n = pascal(key);
                        self.resolved.insert(key.to_owned(), Ty::Named(n.clone()));
                        self.object(obj, props, target, &n, Some(tag))?;
                        n
                    }
                },
                None => {
                    let n = self.fresh(&format!("{union}{ident}"));
                    self.object(obj, props, target, &n, Some(tag))?;
                    n
                }
            };
            let doc = if doc.is_empty() { description(target) } else { doc };
            variants.push(Variant { wire, ident, ty, doc });
        }
        self.defs.insert(union.clone(), Def::Union { doc: description(schema), tag: tag.to_owned(), variants });
        Ok(Some(Ty::Named(union)))
    }

    /// A type named but never generated (see `names_a_type`), if any.
    fn dangling(&self) -> Option<String> {
        fn named(ty: &Ty) -> Option<&str> {
            match ty {
                Ty::Named(n) => Some(n),
                Ty::Vec(t) | Ty::Map(t) | Ty::Nullable(t) => named(t),
                _ => None,
            }
        }
        self.defs.values().find_map(|def| {
            let refs: Vec<&str> = match def {
                Def::Struct { fields, .. } => fields.iter().filter_map(|f| named(&f.ty)).collect(),
                Def::Union { variants, .. } => variants.iter().map(|v| v.ty.as_str()).collect(),
                Def::Enum { .. } => Vec::new(),
            };
            refs.into_iter().find(|n| !self.defs.contains_key(*n)).map(str::to_owned)
        })
    }

    /// Marks the fields that hold their own struct by value (directly or
    /// through other structs), which Rust must box.
    fn box_cycles(&mut self) {
        let edges: BTreeMap<String, Vec<String>> = self
            .defs
            .iter()
            .map(|(name, def)| {
                let targets = match def {
                    Def::Struct { fields, .. } => fields.iter().filter_map(|f| by_value(&f.ty)).collect(),
                    Def::Union { variants, .. } => variants.iter().map(|v| v.ty.clone()).collect(),
                    Def::Enum { .. } => Vec::new(),
                };
                (name.clone(), targets)
            })
            .collect();
        let reaches = |from: &str, to: &str| -> bool {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.to_owned()];
            while let Some(n) = stack.pop() {
                if n == to {
                    return true;
                }
                if seen.insert(n.clone()) {
                    stack.extend(edges.get(&n).into_iter().flatten().cloned());
                }
            }
            false
        };
        let mut boxes = Vec::new();
        for (name, def) in &self.defs {
            if let Def::Struct { fields, .. } = def {
                for (i, f) in fields.iter().enumerate() {
                    if by_value(&f.ty).is_some_and(|target| reaches(&target, name)) {
                        boxes.push((name.clone(), i));
                    }
                }
            }
        }
        for (name, i) in boxes {
            if let Some(Def::Struct { fields, .. }) = self.defs.get_mut(&name) {
                fields[i].boxed = true;
            }
        }
    }
}

// The struct a field holds by value, if any (`Vec` and maps are indirect).
fn by_value(ty: &Ty) -> Option<String> {
    match ty {
        Ty::Named(n) => Some(n.clone()),
        Ty::Nullable(inner) => by_value(inner),
        _ => None,
    }
}

// Unions are named before their members are read too, so a member that
// holds its own union resolves; [`Model::dangling`] catches a union that
// then turned out to stay JSON.
fn names_a_type(schema: &Value, unions: bool) -> bool {
    schema.get("enum").is_some()
        || schema.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty())
        || (unions && schema.get("anyOf").and_then(Value::as_array).is_some_and(|a| a.len() > 1))
}

fn is_never_schema(s: &Value) -> bool {
    s.get("not").is_some_and(|n| n.as_object().is_some_and(Map::is_empty))
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

fn nullable_of(ty: Ty) -> Ty {
    match ty {
        Ty::Nullable(_) | Ty::Value | Ty::Unit => ty,
        other => Ty::Nullable(Box::new(other)),
    }
}

// ---------------------------------------------------------------------------
// Names.

fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = if i > 0 { chars[i - 1] } else { ' ' };
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        let boundary = c.is_ascii_uppercase()
            && (prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next.is_ascii_lowercase()));
        if boundary && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `session.title_changed` -> `SessionTitleChanged`; `AbortData` stays.
fn pascal(s: &str) -> String {
    let mut out = String::new();
    for w in words(s) {
        let mut cs = w.chars();
        if let Some(first) = cs.next() {
            out.push(first.to_ascii_uppercase());
            // Keep the case of the rest of a word that is already mixed
            // (`AbortData` is one word to `words` only when all caps).
            let rest: String = cs.collect();
            if w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
                out.push_str(&rest.to_ascii_lowercase());
            } else {
                out.push_str(&rest);
            }
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'V');
    }
    out
}

fn variant_ident(wire: &str) -> String {
    pascal(wire)
}

fn field_ident(wire: &str) -> String {
    let mut s = words(wire).iter().map(|w| w.to_ascii_lowercase()).collect::<Vec<_>>().join("_");
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    match s.as_str() {
        "self" | "super" | "crate" | "Self" => format!("{s}_"),
        _ if RUST_KEYWORDS.contains(&s.as_str()) => format!("r#{s}"),
        _ => s,
    }
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "do", "dyn", "else", "enum", "extern", "false",
    "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override",
    "priv", "pub", "ref", "return", "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized",
    "use", "virtual", "where", "while", "yield", "abstract", "become",
];

// ---------------------------------------------------------------------------
// Writers.

fn rust_doc(out: &mut String, indent: &str, doc: &str, fallback: &str) {
    let doc = if doc.is_empty() { fallback } else { doc };
    let _ = writeln!(out, "{indent}/// {}", doc.replace('\r', ""));
}

fn rust_ty(ty: &Ty) -> String {
    rust_ty_in(ty, "")
}

// `prefix`: the path to the types' module (`super::` from a child module).
fn rust_ty_in(ty: &Ty, prefix: &str) -> String {
    let rust_ty = |t: &Ty| rust_ty_in(t, prefix);
    match ty {
        Ty::String => "String".into(),
        Ty::Bool => "bool".into(),
        Ty::U64 => "u64".into(),
        Ty::I64 => "i64".into(),
        Ty::F64 => "f64".into(),
        Ty::Value => format!("{prefix}Value"),
        Ty::Unit => "()".into(),
        Ty::Vec(t) => format!("Vec<{}>", rust_ty(t)),
        Ty::Map(t) => format!("{prefix}BTreeMap<String, {}>", rust_ty(t)),
        Ty::Nullable(t) => format!("Option<{}>", rust_ty(t)),
        Ty::Named(n) => format!("{prefix}{n}"),
    }
}

const RUST_PRELUDE: &str = r#"use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

// An enumeration of strings that keeps a value it does not know in
// `Unknown`, so a value a later CLI adds never fails a parse.
macro_rules! string_enum {
    ($(#[$attr:meta])* $name:ident { $($(#[$vattr:meta])* $variant:ident = $wire:literal,)* }) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vattr])* $variant,)*
            /// A value this version does not know, as received.
            Unknown(String),
        }

        impl $name {
            /// The wire value.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $wire,)*
                    $name::Unknown(other) => other,
                }
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $($wire => $name::$variant,)*
                    other => $name::Unknown(other.to_owned()),
                }
            }
        }

        /// An empty value not received: what a wait's data reads as when
        /// the member is missing or unreadable.
        impl Default for $name {
            fn default() -> Self {
                $name::Unknown(String::new())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                Ok($name::from(&*value))
            }
        }
    };
}
"#;

/// Which ways a generated type crosses the wire: written (`ser`: params
/// the client sends, answers to the CLI's requests) and read (`de`).
/// Deriving only what is used halves the serde code of the RPC types.
#[derive(Debug, Clone, Default)]
struct Directions {
    ser: BTreeSet<String>,
    de: BTreeSet<String>,
    /// `None`: every type both ways.
    limited: bool,
}

impl Directions {
    fn both() -> Self {
        Directions::default()
    }

    fn of(&self, name: &str) -> (bool, bool) {
        if self.limited {
            (self.ser.contains(name), self.de.contains(name))
        } else {
            (true, true)
        }
    }
}

/// The structs that can derive `Default`: every required field has a
/// default (strings, numbers, lists, maps, JSON, other such structs).
fn defaultable(model: &Model<'_>) -> BTreeSet<String> {
    let mut yes: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = yes.len();
        for (name, def) in &model.defs {
            if let Def::Struct { fields, .. } = def {
                let ok = fields.iter().all(|f| {
                    !f.required
                        || match &f.ty {
                            Ty::Named(n) => yes.contains(n),
                            _ => true,
                        }
                });
                if ok {
                    yes.insert(name.clone());
                }
            }
        }
        if yes.len() == before {
            return yes;
        }
    }
}

/// The macros of [`Def::Union`], for the files that have unions.
const RUST_UNION_MACROS: &str = r#"
// Objects told apart by a string constant (the tag): one variant per
// object, and `Unknown` for a tag this version does not know or an object
// that does not fit its variant, kept whole. The variants' structs leave
// the tag out; the (de)serializers below read and write it.
#[allow(unused_macros)]
macro_rules! tagged_union {
    ($(#[$attr:meta])* $name:ident { $($(#[$vattr:meta])* $variant:ident($ty:ty),)* }) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            $($(#[$vattr])* $variant($ty),)*
            /// An object this version does not know (or that does not fit
            /// its variant), as received.
            Unknown(Value),
        }
    };
}

#[allow(unused_macros)]
macro_rules! union_serialize {
    ($name:ident, $tag:literal { $($variant:ident = $wire:literal),* }) => {
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let (tag, fields) = match self {
                    $($name::$variant(v) => ($wire, serde_json::to_value(v).map_err(serde::ser::Error::custom)?),)*
                    $name::Unknown(value) => return value.serialize(serializer),
                };
                let mut object = match fields {
                    Value::Object(object) => object,
                    _ => serde_json::Map::new(),
                };
                object.insert($tag.to_owned(), Value::from(tag));
                object.serialize(serializer)
            }
        }
    };
}

#[allow(unused_macros)]
macro_rules! union_deserialize {
    ($name:ident, $tag:literal { $($variant:ident = $wire:literal),* }) => {
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = Value::deserialize(deserializer)?;
                let variant = match value.get($tag).and_then(Value::as_str) {
                    $(Some($wire) => Deserialize::deserialize(&value).map($name::$variant).ok(),)*
                    _ => None,
                };
                Ok(variant.unwrap_or($name::Unknown(value)))
            }
        }
    };
}
"#;

fn rust_defs(
    out: &mut String,
    model: &Model<'_>,
    non_exhaustive: bool,
    dirs: &Directions,
    only: &dyn Fn(&str) -> bool,
    lenient: &BTreeSet<String>,
) {
    let defaults = defaultable(model);
    for (name, def) in model.defs.iter().filter(|(name, _)| only(name)) {
        let (ser, de) = dirs.of(name);
        match def {
            Def::Enum { doc, values } => {
                let _ = writeln!(out);
                let _ = writeln!(out, "string_enum! {{");
                rust_doc(out, "    ", doc, &format!("`{name}`: one of the strings the schema lists."));
                let _ = writeln!(out, "    {name} {{");
                for (wire, ident, doc) in values {
                    rust_doc(out, "        ", doc, &format!("`{wire}`"));
                    let _ = writeln!(out, "        {ident} = {},", json_str(wire));
                }
                let _ = writeln!(out, "    }}");
                let _ = writeln!(out, "}}");
            }
            Def::Union { doc, tag, variants } => {
                let _ = writeln!(out);
                let _ = writeln!(out, "tagged_union! {{");
                rust_doc(out, "    ", doc, &format!("`{name}`: one of the objects the schema lists, by `{tag}`."));
                let _ = writeln!(out, "    {name} {{");
                for v in variants {
                    rust_doc(out, "        ", &v.doc, &format!("`{tag}: {}`", v.wire));
                    let _ = writeln!(out, "        {}({}),", v.ident, v.ty);
                }
                let _ = writeln!(out, "    }}");
                let _ = writeln!(out, "}}");
                let arms: Vec<String> =
                    variants.iter().map(|v| format!("{} = {}", v.ident, json_str(&v.wire))).collect();
                for (wanted, mac) in [(ser, "union_serialize"), (de, "union_deserialize")] {
                    if wanted {
                        let _ = writeln!(out, "{mac}!({name}, {} {{ {} }});", json_str(tag), arms.join(", "));
                    }
                }
            }
            Def::Struct { doc, fields } => {
                let _ = writeln!(out);
                rust_doc(out, "", doc, &format!("`{name}`."));
                let mut derives = vec!["Debug", "Clone", "PartialEq"];
                // Params are built by hand: `..Default::default()` for the
                // optional fields.
                if ser && dirs.limited && defaults.contains(name) {
                    derives.push("Default");
                }
                if ser {
                    derives.push("Serialize");
                }
                if de {
                    derives.push("Deserialize");
                }
                let _ = writeln!(out, "#[derive({})]", derives.join(", "));
                if non_exhaustive {
                    let _ = writeln!(out, "#[non_exhaustive]");
                }
                let _ = writeln!(out, "pub struct {name} {{");
                for f in fields {
                    rust_doc(out, "    ", &f.doc, &format!("`{}`.", f.wire));
                    let (ty, optional) = field_ty(f);
                    let attrs = match (optional, f.required) {
                        (true, false) => ", default, skip_serializing_if = \"Option::is_none\"",
                        (true, true) => ", default",
                        _ => "",
                    };
                    let _ = writeln!(out, "    #[serde(rename = {}{attrs})]", json_str(&f.wire));
                    let _ = writeln!(out, "    pub {}: {ty},", f.ident);
                }
                let _ = writeln!(out, "}}");
                if lenient.contains(name) {
                    lenient_companion(out, model, name, fields);
                }
            }
        }
    }
}

/// A field's Rust type, and whether it is an `Option`.
fn field_ty(f: &Field) -> (String, bool) {
    let mut ty = match &f.ty {
        Ty::Nullable(inner) => rust_ty(inner),
        t => rust_ty(t),
    };
    if f.boxed {
        ty = format!("Box<{ty}>");
    }
    let optional = !f.required || matches!(f.ty, Ty::Nullable(_));
    (if optional { format!("Option<{ty}>") } else { ty }, optional)
}

/// The data of a wait as its handler reads it: the struct `name` with
/// every member read leniently (missing, or of a kind its type does not
/// take, it is its empty value), so no host refuses a wait for a member
/// its handler does not read; the core refuses the wait when one it reads
/// is unreadable (`HandlerKind::reads`). The event stream keeps the
/// strict struct, which turns drifted data into `EventKind::Other`.
fn lenient_companion(out: &mut String, model: &Model<'_>, name: &str, fields: &[Field]) {
    let _ = writeln!(out);
    let _ = writeln!(out, "/// [`{name}`] as a wait's handler reads it: every member missing or of another kind is");
    let _ = writeln!(out, "/// its empty value.");
    let _ = writeln!(out, "#[derive(Deserialize)]");
    let _ = writeln!(out, "pub(crate) struct Lenient{name} {{");
    for f in fields {
        let (ty, optional) = field_ty(f);
        let empty = optional
            || match &f.ty {
                Ty::Named(n) => matches!(model.defs.get(n), Some(Def::Enum { .. })),
                _ => true,
            };
        assert!(empty, "{name}.{}: a wait's required member has no empty value", f.wire);
        let _ = writeln!(
            out,
            "    #[serde(rename = {}, default, deserialize_with = \"crate::events::lenient\")]",
            json_str(&f.wire)
        );
        let _ = writeln!(out, "    {}: {ty},", f.ident);
    }
    let _ = writeln!(out, "}}");
    let _ = writeln!(out);
    let _ = writeln!(out, "impl From<Lenient{name}> for {name} {{");
    let _ = writeln!(out, "    fn from(data: Lenient{name}) -> Self {{");
    let _ = writeln!(out, "        {name} {{");
    for f in fields {
        let _ = writeln!(out, "            {0}: data.{0},", f.ident);
    }
    let _ = writeln!(out, "        }}");
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "}}");
}

fn ts_ty(ty: &Ty) -> String {
    match ty {
        Ty::String => "string".into(),
        Ty::Bool => "boolean".into(),
        Ty::U64 | Ty::I64 | Ty::F64 => "number".into(),
        Ty::Value => "unknown".into(),
        Ty::Unit => "null".into(),
        Ty::Vec(t) => match **t {
            Ty::Nullable(_) => format!("({})[]", ts_ty(t)),
            _ => format!("{}[]", ts_ty(t)),
        },
        Ty::Map(t) => format!("Record<string, {}>", ts_ty(t)),
        Ty::Nullable(t) => format!("{} | null", ts_ty(t)),
        Ty::Named(n) => n.clone(),
    }
}

fn ts_doc(out: &mut String, indent: &str, doc: &str) {
    if !doc.is_empty() {
        let _ = writeln!(out, "{indent}/** {} */", doc.replace("*/", "*\\/"));
    }
}

fn ts_key(key: &str) -> String {
    let ident = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        key.to_owned()
    } else {
        json_str(key)
    }
}

fn ts_defs(out: &mut String, model: &Model<'_>) {
    for (name, def) in &model.defs {
        let _ = writeln!(out);
        match def {
            Def::Enum { doc, values } => {
                ts_doc(out, "", doc);
                let union: Vec<String> = values.iter().map(|(w, _, _)| json_str(w)).collect();
                let _ = writeln!(out, "export type {name} = {};", union.join(" | "));
            }
            Def::Union { doc, tag, variants } => {
                ts_doc(out, "", doc);
                let members: Vec<String> = variants
                    .iter()
                    .map(|v| format!("({{ {}: {} }} & {})", ts_key(tag), json_str(&v.wire), v.ty))
                    .collect();
                let _ = writeln!(out, "export type {name} =\n  | {};", members.join("\n  | "));
            }
            Def::Struct { doc, fields } => {
                ts_doc(out, "", doc);
                let _ = writeln!(out, "export interface {name} {{");
                for f in fields {
                    ts_doc(out, "  ", &f.doc);
                    let q = if f.required { "" } else { "?" };
                    let _ = writeln!(out, "  {}{q}: {};", ts_key(&f.wire), ts_ty(&f.ty));
                }
                let _ = writeln!(out, "}}");
            }
        }
    }
}

fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn header(comment: &str) -> String {
    format!(
        "{comment} Generated by `cargo run -p copilot-codegen` from the schemas of the Copilot CLI {CLI_VERSION}\n\
         {comment} (core/schemas/{CLI_VERSION}/). Do not edit: edit the generator, or vendor newer schemas.\n"
    )
}

// ---------------------------------------------------------------------------

mod events {
    use super::*;

    pub(crate) struct Variant {
        pub wire: String,
        pub ident: String,
        pub data: Ty,
        pub doc: String,
        pub request_id: bool,
    }

    /// Event types the CLI sends that its schema does not list (the debug
    /// events of the model loop, in every real transcript): a variant each,
    /// with the data as JSON, so no event of a real session is `Other`.
    pub(crate) const OBSERVED: &[(&str, &str)] = &[
        ("model.log", "A log line of the model loop."),
        ("model.message", "A message of a model call."),
        ("model.messages_snapshot", "The messages sent to the model."),
        ("model.model_call_started", "A model call started."),
        ("model.model_call_success", "A model call succeeded, with its usage."),
        ("model.response", "A model call's response."),
        ("model.tool_execution", "A tool ran in the model loop."),
        ("model.turn_ended", "A turn of the model loop ended."),
        ("model.turn_started", "A turn of the model loop started."),
    ];

    pub(crate) struct Events<'s> {
        pub model: Model<'s>,
        pub variants: Vec<Variant>,
    }

    pub(crate) fn build(schema: &Value) -> Result<Events<'_>, String> {
        let defs = schema.get("definitions").and_then(Value::as_object).ok_or("no definitions")?;
        let mut model = Model::new(Some(defs));
        let union = defs
            .get("SessionEvent")
            .and_then(|e| e.get("anyOf"))
            .and_then(Value::as_array)
            .ok_or("SessionEvent is not an anyOf")?;
        let mut variants = Vec::new();
        let mut seen = BTreeSet::new();
        for member in union {
            let key = member
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/definitions/"))
                .ok_or("a SessionEvent member is not a $ref")?;
            let event = &defs[key];
            let props = event.get("properties").ok_or_else(|| format!("{key} has no properties"))?;
            let wire = props
                .pointer("/type/const")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{key} has no const type"))?
                .to_owned();
            let ident = pascal(&wire);
            if !seen.insert(ident.clone()) {
                return Err(format!("two event types give the variant {ident}"));
            }
            let data_schema = props.get("data").ok_or_else(|| format!("{key} has no data"))?;
            let data = model.resolve(data_schema, &format!("{ident}Data"))?;
            let mut doc = description(member);
            if doc.is_empty() {
                doc = format!("`{wire}`.");
            }
            variants.push(Variant { wire, ident, data, doc, request_id: false });
        }
        for (wire, doc) in OBSERVED {
            let ident = pascal(wire);
            if !seen.insert(ident.clone()) {
                return Err(format!("{wire} is in the schema now: drop it from OBSERVED"));
            }
            let doc = format!("{doc} Seen on the wire, not in the schema: the data stays JSON.");
            variants.push(Variant { wire: (*wire).to_owned(), ident, data: Ty::Value, doc, request_id: false });
        }
        model.box_cycles();
        if let Some(name) = model.dangling() {
            return Err(format!("the event schema names {name} but it stays JSON"));
        }
        for v in &mut variants {
            if let Ty::Named(n) = &v.data {
                if let Some(Def::Struct { fields, .. }) = model.defs.get(n) {
                    v.request_id = fields.iter().any(|f| f.wire == "requestId" && f.required && f.ty == Ty::String);
                }
            }
        }
        Ok(Events { model, variants })
    }

    pub(crate) fn rust(e: &Events<'_>) -> String {
        let mut out = header("//");
        out.push_str("//! The session events of the CLI's schema, typed: the data of every event type,\n");
        out.push_str("//! and [`EventKind`], one variant per type plus [`EventKind::Other`] for the\n");
        out.push_str("//! rest. Parsing lives in `crate::events`.\n\n");
        out.push_str(RUST_PRELUDE);
        let _ = writeln!(out);
        let _ = writeln!(out, "/// Every event type that has a typed variant in [`EventKind`], as on the wire.");
        let _ = writeln!(out, "pub const EVENT_TYPES: &[&str] = &[");
        for v in &e.variants {
            let _ = writeln!(out, "    {},", json_str(&v.wire));
        }
        let _ = writeln!(out, "];");
        let _ = writeln!(out);
        let _ = writeln!(out, "/// The `type` of a session event and its `data`, typed for every type the schema of");
        let _ = writeln!(out, "/// the CLI {CLI_VERSION} lists.");
        let _ = writeln!(out, "#[derive(Debug, Clone, PartialEq)]");
        let _ = writeln!(out, "#[non_exhaustive]");
        let _ = writeln!(out, "#[allow(clippy::large_enum_variant)]");
        let _ = writeln!(out, "pub enum EventKind {{");
        for v in &e.variants {
            rust_doc(&mut out, "    ", &v.doc, "");
            let _ = writeln!(out, "    {}({}),", v.ident, rust_ty(&v.data));
        }
        out.push_str(
            "    /// Any other type, or a typed one whose data did not fit its struct\n    \
             /// (schema drift). Nothing of the event is lost.\n    \
             Other {\n        \
             /// The wire `type`.\n        \
             event_type: String,\n        \
             /// The `data`, as received.\n        \
             data: Value,\n    \
             },\n}\n\n",
        );
        let _ = writeln!(out, "impl EventKind {{");
        let _ = writeln!(out, "    /// The wire `type`, such as `assistant.message`.");
        let _ = writeln!(out, "    pub fn event_type(&self) -> &str {{");
        let _ = writeln!(out, "        match self {{");
        for v in &e.variants {
            let _ = writeln!(out, "            EventKind::{}(_) => {},", v.ident, json_str(&v.wire));
        }
        let _ = writeln!(out, "            EventKind::Other {{ event_type, .. }} => event_type,");
        let _ = writeln!(out, "        }}\n    }}\n");
        out.push_str(
            "    /// `data.requestId`: the id that correlates a request-like event, the\n    \
             /// client's answer to it and its `*.completed` event.\n    \
             ///\n    \
             /// For [`EventKind::Other`] it is read from the raw data, so a request\n    \
             /// whose data drifted still yields the id its answer must carry.\n    \
             pub fn request_id(&self) -> Option<&str> {\n        match self {\n",
        );
        for v in e.variants.iter().filter(|v| v.request_id) {
            let _ = writeln!(out, "            EventKind::{}(d) => Some(&d.request_id),", v.ident);
        }
        out.push_str(
            "            EventKind::Other { data, .. } => data.get(\"requestId\").and_then(Value::as_str),\n            \
             _ => None,\n        }\n    }\n\n",
        );
        out.push_str(
            "    /// The `data` as JSON: the typed data written back (fields it does not\n    \
             /// know are not kept), or the data of [`EventKind::Other`] as received.\n    \
             pub fn data_value(&self) -> Value {\n        \
             let written = match self {\n",
        );
        for v in &e.variants {
            let _ = writeln!(out, "            EventKind::{}(d) => serde_json::to_value(d),", v.ident);
        }
        out.push_str(
            "            EventKind::Other { data, .. } => return data.clone(),\n        \
             };\n        \
             // Serializing these types cannot fail: their maps have string keys.\n        \
             written.unwrap_or(Value::Null)\n    }\n\n",
        );
        out.push_str("    /// Whether `event_type` has a typed variant.\n");
        out.push_str(
            "    pub fn is_typed(event_type: &str) -> bool {\n        EVENT_TYPES.contains(&event_type)\n    }\n\n",
        );
        out.push_str(
            "    /// The typed variant of `event_type` read from the JSON text `data`;\n    \
             /// `None` when the type has no variant or the data does not fit it.\n    \
             pub fn parse_typed(event_type: &str, data: &str) -> Option<EventKind> {\n        \
             Some(match event_type {\n",
        );
        for v in &e.variants {
            let _ = writeln!(
                out,
                "            {} => EventKind::{}(serde_json::from_str(data).ok()?),",
                json_str(&v.wire),
                v.ident
            );
        }
        out.push_str("            _ => return None,\n        })\n    }\n\n");
        out.push_str(
            "    /// As [`EventKind::parse_typed`], for data already parsed into a `Value`.\n    \
             pub fn parse_typed_value(event_type: &str, data: &Value) -> Option<EventKind> {\n        \
             Some(match event_type {\n",
        );
        for v in &e.variants {
            let _ = writeln!(
                out,
                "            {} => EventKind::{}(Deserialize::deserialize(data).ok()?),",
                json_str(&v.wire),
                v.ident
            );
        }
        out.push_str("            _ => return None,\n        })\n    }\n\n");
        out.push_str(
            "    /// Reads the typed variant of `event_type` straight from `data`, in\n    \
             /// one pass, into `out` (written only on success, and with only the\n    \
             /// variant's own bytes: the enum is large); `data` is given back,\n    \
             /// unread, when the type has no variant. An error may only mean that\n    \
             /// the data does not fit.\n    \
             pub(crate) fn deserialize_typed_into<'de, D: Deserializer<'de>>(\n        \
             event_type: &str,\n        \
             data: D,\n        \
             out: &mut EventKind,\n    \
             ) -> Result<Result<(), D::Error>, D> {\n        \
             Ok(match event_type {\n",
        );
        for v in &e.variants {
            let _ = writeln!(
                out,
                "            {} => Deserialize::deserialize(data).map(|d| *out = EventKind::{}(d)),",
                json_str(&v.wire),
                v.ident
            );
        }
        out.push_str("            _ => return Err(data),\n        })\n    }\n}\n");
        // The data of the events that are waits (the core's answer table).
        let waits: BTreeSet<String> = e
            .variants
            .iter()
            .filter(|v| {
                copilot_core::ANSWERS
                    .iter()
                    .any(|r| matches!(r.trigger, copilot_core::Trigger::Event(t) if t == v.wire))
            })
            .filter_map(|v| match &v.data {
                Ty::Named(n) => Some(n.clone()),
                _ => None,
            })
            .collect();
        rust_defs(&mut out, &e.model, true, &Directions::both(), &|_| true, &waits);
        out
    }

    pub(crate) fn typescript(e: &Events<'_>) -> String {
        let mut out = header("//");
        out.push_str(
            "// The session events of the CLI's schema: every event type's data, and\n\
             // `TypedSessionEvent`, the union discriminated on `type`.\n\n",
        );
        out.push_str(
            "/** The fields every session event has, around its `type` and `data`. */\n\
             export interface SessionEventEnvelope<T extends string, D> {\n  \
             /** Unique event identifier (UUID v4). */\n  id: string;\n  \
             /** ISO 8601 timestamp when the event was created. */\n  timestamp: string;\n  \
             /** The chronologically preceding event; null for the first. */\n  parentId: string | null;\n  \
             /** The event is transient and not persisted to the session's log. */\n  ephemeral?: boolean;\n  \
             /** The sub-agent that emitted the event; absent for the root agent. */\n  agentId?: string;\n  \
             /** Type discriminator. */\n  type: T;\n  \
             /** The event's data. */\n  data: D;\n}\n\n",
        );
        let _ = writeln!(out, "/** The data of each session event type, by type. */");
        let _ = writeln!(out, "export interface SessionEventDataMap {{");
        for v in &e.variants {
            ts_doc(&mut out, "  ", &v.doc);
            let _ = writeln!(out, "  {}: {};", json_str(&v.wire), ts_ty(&v.data));
        }
        let _ = writeln!(out, "}}\n");
        let _ = writeln!(out, "/** Every session event type the schema lists. */");
        let _ = writeln!(out, "export type SessionEventType = keyof SessionEventDataMap;\n");
        let _ = writeln!(out, "/** A session event of the schema, discriminated on `type`. */");
        let _ = writeln!(out, "export type TypedSessionEvent = {{");
        let _ = writeln!(out, "  [T in SessionEventType]: SessionEventEnvelope<T, SessionEventDataMap[T]>;");
        let _ = writeln!(out, "}}[SessionEventType];");
        ts_defs(&mut out, &e.model);
        out
    }
}

mod rpc {
    use super::*;

    pub(crate) struct Method {
        pub name: String,
        pub namespace: String,
        pub ident: String,
        pub params: Ty,
        pub result: Ty,
        pub doc: String,
        pub notification: bool,
    }

    pub(crate) struct Rpc<'s> {
        pub model: Model<'s>,
        pub methods: Vec<Method>,
        pub directions: Directions,
    }

    /// Fields the CLI answers with `null` where its schema says an object
    /// (seen on the wire): typed as nullable, so the answer still reads.
    /// `session.agent.getCurrent` without a custom agent selected answers
    /// `{"agent": null}`, as the schema's own description says.
    pub(crate) const WIRE_NULLABLE: &[(&str, &str)] = &[("AgentGetCurrentResult", "agent")];

    /// The namespaces generated: methods the client calls (`server`,
    /// `session`) and requests the CLI sends the client (`clientSession`,
    /// `clientGlobal`).
    pub(crate) const NAMESPACES: &[&str] = &["server", "session", "clientSession", "clientGlobal"];

    fn collect<'s>(node: &'s Value, out: &mut Vec<&'s Value>) {
        if let Some(obj) = node.as_object() {
            if obj.contains_key("rpcMethod") {
                out.push(node);
                return;
            }
            let mut keys: Vec<&String> = obj.keys().collect();
            keys.sort();
            for k in keys {
                collect(&obj[k], out);
            }
        }
    }

    pub(crate) fn build(schema: &Value) -> Result<Rpc<'_>, String> {
        let defs = schema.get("definitions").and_then(Value::as_object);
        let mut model = Model::new(defs);
        model.unions = true;
        let mut methods = Vec::new();
        let mut idents = BTreeSet::new();
        for ns in NAMESPACES {
            let mut found = Vec::new();
            collect(schema.get(*ns).ok_or_else(|| format!("no namespace {ns}"))?, &mut found);
            found.sort_by_key(|m| m["rpcMethod"].as_str().unwrap_or_default().to_owned());
            for m in found {
                let name = m["rpcMethod"].as_str().ok_or("rpcMethod is not a string")?.to_owned();
                let ident = pascal(&name);
                if !idents.insert(ident.clone()) {
                    return Err(format!("two methods give the name {ident}"));
                }
                let mut params = match m.get("params") {
                    None | Some(Value::Null) => Ty::Unit,
                    Some(p) => model.resolve(p, &format!("{ident}Params"))?,
                };
                if *ns == "session" {
                    params = without_session_id(&mut model, params, &ident);
                }
                let result = match m.get("result") {
                    None | Some(Value::Null) => Ty::Unit,
                    Some(r) => model.resolve(r, &format!("{ident}Result"))?,
                };
                methods.push(Method {
                    name,
                    namespace: (*ns).to_owned(),
                    ident,
                    params,
                    result,
                    doc: description(m),
                    notification: m.get("notification") == Some(&Value::Bool(true)),
                });
            }
        }
        for (name, field) in WIRE_NULLABLE {
            let Some(Def::Struct { fields, .. }) = model.defs.get_mut(*name) else {
                return Err(format!("WIRE_NULLABLE: no struct {name}"));
            };
            let f = fields
                .iter_mut()
                .find(|f| f.wire == *field)
                .ok_or_else(|| format!("WIRE_NULLABLE: {name} has no {field}"))?;
            f.ty = nullable_of(f.ty.clone());
        }
        model.box_cycles();
        if let Some(name) = model.dangling() {
            return Err(format!("the API schema names {name} but it stays JSON"));
        }
        let directions = directions(&model, &methods);
        Ok(Rpc { model, methods, directions })
    }

    fn named(ty: &Ty, out: &mut Vec<String>) {
        match ty {
            Ty::Named(n) => out.push(n.clone()),
            Ty::Vec(t) | Ty::Map(t) | Ty::Nullable(t) => named(t, out),
            _ => {}
        }
    }

    /// `roots` and every type inside them.
    fn closure(model: &Model<'_>, mut stack: Vec<String>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            match model.defs.get(&n) {
                Some(Def::Struct { fields, .. }) => fields.iter().for_each(|f| named(&f.ty, &mut stack)),
                Some(Def::Union { variants, .. }) => stack.extend(variants.iter().map(|v| v.ty.clone())),
                _ => {}
            }
        }
        seen
    }

    /// A session method's params leave out `sessionId`: the session's own
    /// id is filled in by the call. Params that had nothing else become `()`.
    fn without_session_id(model: &mut Model<'_>, params: Ty, ident: &str) -> Ty {
        let Ty::Named(name) = &params else { return params };
        // Only the method's own params type, never a shared definition.
        if *name != format!("{ident}Params") {
            return params;
        }
        let Some(Def::Struct { fields, .. }) = model.defs.get_mut(name) else { return params };
        fields.retain(|f| f.wire != "sessionId");
        if fields.is_empty() {
            model.defs.remove(name);
            return Ty::Unit;
        }
        params
    }

    /// The types written (params of the client's calls, answers to the
    /// CLI's requests) and read (results, the CLI's requests), each with
    /// every type inside it.
    fn directions(model: &Model<'_>, methods: &[Method]) -> Directions {
        let (mut written, mut read) = (Vec::new(), Vec::new());
        for m in methods {
            let client_calls = m.namespace == "server" || m.namespace == "session";
            let (sent, received) = if client_calls { (&m.params, &m.result) } else { (&m.result, &m.params) };
            named(sent, &mut written);
            named(received, &mut read);
        }
        Directions { ser: closure(model, written), de: closure(model, read), limited: true }
    }

    pub(crate) fn rust(r: &Rpc<'_>) -> Result<String, String> {
        let mut out = header("//");
        out.push_str(
            "//! The JSON-RPC methods of the CLI's API schema, typed: the params and result\n\
             //! of every method, [`METHODS`] (the catalogue), and a marker type per method in\n\
             //! [`methods`] that names both through [`RpcMethod`].\n\n",
        );
        out.push_str(RUST_PRELUDE);
        out.push_str(RUST_UNION_MACROS);
        out.push_str("\nuse crate::rpc::RpcCaller;\n#[allow(unused_imports)]\nuse super::rpc_core::*;\n");
        out.push_str(
            "\n/// A method of the CLI's API: its wire name and the types of its params and result.\n\
             pub trait RpcMethod {\n    \
             /// The wire name, such as `session.model.switchTo`.\n    \
             const NAME: &'static str;\n    \
             /// The params (`()` for none; a session method's leave out `sessionId`).\n    \
             type Params;\n    \
             /// The result (`()` for none).\n    \
             type Result;\n}\n\n\
             /// One entry of [`METHODS`].\n\
             #[derive(Debug, Clone, Copy, PartialEq, Eq)]\n\
             pub struct MethodInfo {\n    \
             /// The wire name.\n    pub name: &'static str,\n    \
             /// The schema's namespace: `server` and `session` (the client calls them),\n    \
             /// `clientSession` and `clientGlobal` (the CLI calls the client).\n    pub namespace: &'static str,\n    \
             /// The Rust type of the params.\n    pub params: &'static str,\n    \
             /// The Rust type of the result.\n    pub result: &'static str,\n}\n\n",
        );
        let _ = writeln!(out, "/// Every method of the schema, in namespace then name order.");
        let _ = writeln!(out, "pub const METHODS: &[MethodInfo] = &[");
        for m in &r.methods {
            let _ = writeln!(
                out,
                "    MethodInfo {{ name: {}, namespace: {}, params: {}, result: {} }},",
                json_str(&m.name),
                json_str(&m.namespace),
                json_str(&rust_ty(&m.params)),
                json_str(&rust_ty(&m.result))
            );
        }
        let _ = writeln!(out, "];\n");
        let _ = writeln!(out, "/// One marker type per method, implementing [`RpcMethod`].");
        let _ = writeln!(out, "pub mod methods {{");
        let _ = writeln!(out, "    use super::RpcMethod;");
        for m in &r.methods {
            let _ = writeln!(out);
            let doc = if m.notification { format!("{} (a notification)", m.doc) } else { m.doc.clone() };
            rust_doc(&mut out, "    ", &format!("`{}`: {doc}", m.name), "");
            let _ = writeln!(out, "    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]");
            let _ = writeln!(out, "    pub struct {};", m.ident);
            let _ = writeln!(out, "    impl RpcMethod for {} {{", m.ident);
            let _ = writeln!(out, "        const NAME: &'static str = {};", json_str(&m.name));
            let _ = writeln!(out, "        type Params = {};", rust_ty_in(&m.params, "super::"));
            let _ = writeln!(out, "        type Result = {};", rust_ty_in(&m.result, "super::"));
            let _ = writeln!(out, "    }}");
        }
        let _ = writeln!(out, "}}");
        out.push_str(&rust_calls(r)?);
        let core = core_types(r);
        rust_defs(&mut out, &r.model, false, &r.directions, &|name| !core.contains(name), &BTreeSet::new());
        Ok(out)
    }

    /// The methods whose types every build has (`rpc_core.rs`): the model
    /// list, a message's attachments, model and agent selection. The rest
    /// are behind the `rpc-types` feature, a large compile.
    pub(crate) const CORE_METHODS: &[&str] = &[
        "models.list",
        "session.send",
        "session.model.getCurrent",
        "session.model.switchTo",
        "session.agent.list",
        "session.agent.getCurrent",
        "session.agent.select",
        "session.agent.deselect",
    ];

    fn core_types(r: &Rpc<'_>) -> BTreeSet<String> {
        let mut roots = Vec::new();
        for m in r.methods.iter().filter(|m| CORE_METHODS.contains(&m.name.as_str())) {
            named(&m.params, &mut roots);
            named(&m.result, &mut roots);
        }
        closure(&r.model, roots)
    }

    /// The types of [`CORE_METHODS`], for every build.
    pub(crate) fn rust_core(r: &Rpc<'_>) -> String {
        let mut out = header("//");
        out.push_str(
            "//! The types of the CLI's API that every build has: the model list, a\n\
             //! message's attachments, model and agent selection. The feature `rpc-types`\n\
             //! adds the rest (`rpc.rs`).\n\n",
        );
        out.push_str(RUST_PRELUDE);
        out.push_str(RUST_UNION_MACROS);
        let core = core_types(r);
        rust_defs(&mut out, &r.model, false, &r.directions, &|name| core.contains(name), &BTreeSet::new());
        out
    }

    /// The methods a client calls, as the CLI names them: `models.list` is
    /// `list` in the group `models`. A session's methods drop `session.`.
    pub(crate) struct Group {
        /// The path to this group (empty for the root).
        pub path: Vec<String>,
        pub groups: BTreeMap<String, Group>,
        /// Leaf name and method index.
        pub calls: Vec<(String, usize)>,
    }

    pub(crate) fn tree(r: &Rpc<'_>, namespace: &str) -> Result<Group, String> {
        let mut root = Group { path: Vec::new(), groups: BTreeMap::new(), calls: Vec::new() };
        for (i, m) in r.methods.iter().enumerate().filter(|(_, m)| m.namespace == namespace) {
            let name = if namespace == "session" {
                m.name.strip_prefix("session.").ok_or_else(|| format!("{} is not session.*", m.name))?
            } else {
                m.name.as_str()
            };
            let mut segments: Vec<&str> = name.split('.').collect();
            let leaf = segments.pop().ok_or("empty method name")?;
            let mut group = &mut root;
            for seg in segments {
                let mut path = group.path.clone();
                path.push(seg.to_owned());
                group = group.groups.entry(seg.to_owned()).or_insert(Group {
                    path,
                    groups: BTreeMap::new(),
                    calls: Vec::new(),
                });
            }
            group.calls.push((leaf.to_owned(), i));
        }
        fn check(g: &Group) -> Result<(), String> {
            if let Some((leaf, _)) = g.calls.iter().find(|(leaf, _)| g.groups.contains_key(leaf)) {
                return Err(format!("{leaf} in {:?} is both a method and a group", g.path));
            }
            g.groups.values().try_for_each(check)
        }
        check(&root)?;
        Ok(root)
    }

    /// How many methods the call tree of `namespace` holds.
    pub(crate) fn call_count(g: &Group) -> usize {
        g.calls.len() + g.groups.values().map(call_count).sum::<usize>()
    }

    fn api_name(namespace: &str, path: &[String]) -> String {
        let path: String = path.iter().map(|p| pascal(p)).collect();
        format!("{}{path}Api", pascal(namespace))
    }

    fn rust_group(out: &mut String, r: &Rpc<'_>, ns: &str, g: &Group) {
        let name = api_name(ns, &g.path);
        let what = if g.path.is_empty() {
            format!("The `{ns}` methods of the CLI")
        } else {
            let prefix = if ns == "session" { "session." } else { "" };
            format!("The `{prefix}{}.*` methods", g.path.join("."))
        };
        let _ = writeln!(out);
        let _ = writeln!(out, "/// {what}, typed. Each call goes through the caller `C` (a blocking");
        let _ = writeln!(out, "/// client or session, or an async one), with its deadline and errors.");
        if ns == "session" {
            let _ = writeln!(out, "/// The session's id is filled in.");
        }
        let _ = writeln!(out, "pub struct {name}<'a, C: ?Sized>(pub(crate) &'a C);");
        let _ = writeln!(out);
        let _ = writeln!(out, "impl<C: ?Sized> std::fmt::Debug for {name}<'_, C> {{");
        let _ = writeln!(out, "    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{");
        let _ = writeln!(out, "        f.write_str({})", json_str(&name));
        let _ = writeln!(out, "    }}\n}}\n");
        let _ = writeln!(out, "impl<'a, C: RpcCaller + ?Sized> {name}<'a, C> {{");
        let mut first = true;
        for (seg, sub) in &g.groups {
            if !first {
                let _ = writeln!(out);
            }
            first = false;
            let prefix = if ns == "session" { "session." } else { "" };
            let _ = writeln!(out, "    /// The `{prefix}{}.*` methods.", sub.path.join("."));
            let _ = writeln!(out, "    pub fn {}(&self) -> {}<'a, C> {{", field_ident(seg), api_name(ns, &sub.path));
            let _ = writeln!(out, "        {}(self.0)", api_name(ns, &sub.path));
            let _ = writeln!(out, "    }}");
        }
        for (leaf, i) in &g.calls {
            let m = &r.methods[*i];
            if !first {
                let _ = writeln!(out);
            }
            first = false;
            rust_doc(out, "    ", &format!("`{}`: {}", m.name, m.doc), "");
            // A method without a result answers `{}` or `null`: either is fine.
            let result = if m.result == Ty::Unit { "serde::de::IgnoredAny".to_owned() } else { rust_ty(&m.result) };
            let fn_name = field_ident(leaf);
            if m.params == Ty::Unit {
                let _ = writeln!(out, "    pub fn {fn_name}(&self) -> C::Call<{result}> {{");
                let _ = writeln!(out, "        self.0.call::<_, {result}>({}, ())", json_str(&m.name));
            } else {
                let _ = writeln!(
                    out,
                    "    pub fn {fn_name}(&self, params: {}) -> C::Call<{result}> {{",
                    rust_ty(&m.params)
                );
                let _ = writeln!(out, "        self.0.call::<_, {result}>({}, params)", json_str(&m.name));
            }
            let _ = writeln!(out, "    }}");
        }
        let _ = writeln!(out, "}}");
        for sub in g.groups.values() {
            rust_group(out, r, ns, sub);
        }
    }

    /// The typed calls: `ServerApi` and `SessionApi` and their groups.
    pub(crate) fn rust_calls(r: &Rpc<'_>) -> Result<String, String> {
        let mut out = String::new();
        for ns in ["server", "session"] {
            rust_group(&mut out, r, ns, &tree(r, ns)?);
        }
        Ok(out)
    }

    fn ts_group(out: &mut String, r: &Rpc<'_>, ns: &str, g: &Group) {
        let name = api_name(ns, &g.path);
        let _ = writeln!(out);
        if g.path.is_empty() {
            let _ = writeln!(out, "/** The `{ns}` methods of the CLI as calls (`rpc` of a client or session). */");
        } else {
            let prefix = if ns == "session" { "session." } else { "" };
            let _ = writeln!(out, "/** The `{prefix}{}.*` methods. */", g.path.join("."));
        }
        let _ = writeln!(out, "export interface {name} {{");
        for (seg, sub) in &g.groups {
            let _ = writeln!(out, "  {}: {};", ts_key(seg), api_name(ns, &sub.path));
        }
        for (leaf, i) in &g.calls {
            let m = &r.methods[*i];
            ts_doc(out, "  ", &format!("`{}`: {}", m.name, m.doc));
            let params = if m.params == Ty::Unit {
                String::new()
            } else {
                // Params whose fields are all optional may be left out.
                let optional = match &m.params {
                    Ty::Named(n) => match r.model.defs.get(n) {
                        Some(Def::Struct { fields, .. }) => fields.iter().all(|f| !f.required),
                        _ => false,
                    },
                    _ => false,
                };
                format!("params{}: {}, ", if optional { "?" } else { "" }, ts_ty(&m.params))
            };
            let result = if m.result == Ty::Unit { "void".to_owned() } else { ts_ty(&m.result) };
            let _ = writeln!(out, "  {}({params}options?: RpcCallOptions): Promise<{result}>;", ts_key(leaf));
        }
        let _ = writeln!(out, "}}");
        for sub in g.groups.values() {
            ts_group(out, r, ns, sub);
        }
    }

    /// The d.ts of the typed calls.
    pub(crate) fn ts_calls(r: &Rpc<'_>) -> Result<String, String> {
        let mut out = String::from(
            "\n/** Options of one call. */\nexport interface RpcCallOptions {\n  \
             /** The call's deadline in milliseconds (default: the client's `requestTimeoutMs`). */\n  \
             timeoutMs?: number;\n}\n",
        );
        for ns in ["server", "session"] {
            ts_group(&mut out, r, ns, &tree(r, ns)?);
        }
        Ok(out)
    }

    /// The npm package's runtime of the typed calls: the method names, and
    /// a builder of the nested call objects over one `call(method, params,
    /// options)` function. Small on purpose: the types are in the d.ts.
    pub(crate) fn js_calls(r: &Rpc<'_>) -> String {
        let mut out = header("//");
        out.push_str(
            "// The CLI's methods as calls: `client.rpc.models.list()`,\n\
             // `session.rpc.model.switchTo({ modelId })`. Types: types/generated/rpc.d.ts.\n\n",
        );
        for ns in ["server", "session"] {
            let names: Vec<String> = r
                .methods
                .iter()
                .filter(|m| m.namespace == ns)
                .map(|m| {
                    let name = if ns == "session" { &m.name["session.".len()..] } else { &m.name };
                    // `~`: no params, the call takes only options.
                    json_str(&format!("{}{name}", if m.params == Ty::Unit { "~" } else { "" }))
                })
                .collect();
            let _ =
                writeln!(out, "/** The `{ns}` methods{}. */", if ns == "session" { " without `session.`" } else { "" });
            let _ = writeln!(out, "export const {}_METHODS = [", ns.to_ascii_uppercase());
            for chunk in names.chunks(4) {
                let _ = writeln!(out, "  {},", chunk.join(", "));
            }
            let _ = writeln!(out, "];\n");
        }
        out.push_str(
            "/**\n * The nested call objects of `names`: `a.b.c` becomes `calls.a.b.c(params,\n \
             * options)` (`calls.a.b.c(options)` without params), which resolves with\n \
             * `call(prefix + \"a.b.c\", params ?? {}, options)`.\n \
             */\n\
             export function rpcCalls(names, prefix, call) {\n  \
             const root = {};\n  \
             for (const entry of names) {\n    \
             const bare = entry.startsWith(\"~\");\n    \
             const name = bare ? entry.slice(1) : entry;\n    \
             const path = name.split(\".\");\n    \
             const leaf = path.pop();\n    \
             let group = root;\n    \
             for (const seg of path) group = group[seg] ??= {};\n    \
             const method = prefix + name;\n    \
             group[leaf] = bare\n      \
             ? (options) => call(method, {}, options)\n      \
             : (params, options) => call(method, params ?? {}, options);\n  \
             }\n  \
             return root;\n}\n",
        );
        out
    }

    pub(crate) fn typescript(r: &Rpc<'_>) -> Result<String, String> {
        let mut out = header("//");
        out.push_str(
            "// The JSON-RPC methods of the CLI's API schema: params and result types, and\n\
             // one map per namespace from method name to `{ params; result }`.\n",
        );
        for ns in NAMESPACES {
            let _ = writeln!(out);
            let _ = writeln!(out, "/** The `{ns}` methods, by wire name. */");
            let _ = writeln!(out, "export interface {}Methods {{", pascal(ns));
            for m in r.methods.iter().filter(|m| m.namespace == *ns) {
                ts_doc(&mut out, "  ", &m.doc);
                let _ = writeln!(
                    out,
                    "  {}: {{ params: {}; result: {} }};",
                    json_str(&m.name),
                    if m.params == Ty::Unit { "void".to_owned() } else { ts_ty(&m.params) },
                    ts_ty(&m.result)
                );
            }
            let _ = writeln!(out, "}}");
        }
        out.push_str(&ts_calls(r)?);
        ts_defs(&mut out, &r.model);
        Ok(out)
    }
}

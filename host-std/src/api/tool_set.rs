//! [`ToolSet`]: a session's tool filter ([`available_tools`] or
//! [`excluded_tools`]) built from source-qualified entries, as the official
//! SDKs' builder of the same name builds it. The sources, the characters
//! of a name and the isolated built-in tools are the core's.
//!
//! [`available_tools`]: crate::SessionConfig::available_tools
//! [`excluded_tools`]: crate::SessionConfig::excluded_tools

use copilot_core::{tool_filter_name_ok, TOOL_NAME_REFUSAL, TOOL_SOURCES};

use crate::error::{Error, Result};

/// The built-in tools that act only within their session (no host files
/// outside it, no other session, no host environment, no network): safe
/// for an empty-mode server shared by many users. Pass it to
/// [`ToolSet::add_builtin_many`].
pub const BUILTIN_TOOLS_ISOLATED: &[&str] = copilot_core::BUILTIN_TOOLS_ISOLATED;

/// A list of tool filter entries (`builtin:<name>`, `mcp:<name>`,
/// `custom:<name>`, each name a tool's or `*` for every tool of its
/// source). The CLI classifies a tool by where it was registered, so
/// `builtin:bash` matches only the CLI's own `bash`, never an MCP server's
/// tool of that name.
///
/// ```
/// use copilot_host::{SessionConfig, ToolSet, BUILTIN_TOOLS_ISOLATED};
/// let tools = ToolSet::new().add_builtin_many(BUILTIN_TOOLS_ISOLATED)?.add_mcp("*")?.add_custom("*")?;
/// let config = SessionConfig { available_tools: Some(tools.into()), ..SessionConfig::default() };
/// # let _ = config;
/// # Ok::<(), copilot_host::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSet {
    items: Vec<String>,
}

impl ToolSet {
    /// An empty set: a session given it as `available_tools` has no tool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a built-in tool by name, or `*` for every built-in tool.
    pub fn add_builtin(self, name: &str) -> Result<Self> {
        self.add(0, name)
    }

    /// Adds each of `names` as [`add_builtin`](Self::add_builtin) does.
    pub fn add_builtin_many<I, S>(self, names: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        names.into_iter().try_fold(self, |set, name| set.add(0, name.as_ref()))
    }

    /// Adds an MCP server's tool by the CLI's name for it (such as
    /// `github-list_issues`), or `*` for every MCP tool.
    pub fn add_mcp(self, tool_name: &str) -> Result<Self> {
        self.add(1, tool_name)
    }

    /// Adds one of the client's own tools (or a custom agent's) by name,
    /// or `*` for all of them.
    pub fn add_custom(self, name: &str) -> Result<Self> {
        self.add(2, name)
    }

    /// The entries, in the order they were added.
    pub fn to_vec(&self) -> Vec<String> {
        self.items.clone()
    }

    /// The entries, in the order they were added.
    pub fn into_vec(self) -> Vec<String> {
        self.items
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds `name` under the core's source number `source`, or refuses a
    /// name no tool can have.
    fn add(mut self, source: usize, name: &str) -> Result<Self> {
        let source = TOOL_SOURCES[source];
        if !tool_filter_name_ok(name) {
            return Err(Error::Config(format!("invalid {source} tool name {name:?}{TOOL_NAME_REFUSAL}")));
        }
        self.items.push(format!("{source}:{name}"));
        Ok(self)
    }
}

impl From<ToolSet> for Vec<String> {
    fn from(set: ToolSet) -> Self {
        set.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_source_qualified_in_order_and_bad_names_are_refused() {
        let set = ToolSet::new().add_builtin_many(["bash", "view"]).unwrap().add_mcp("*").unwrap();
        let set = set.add_custom("get_weather").unwrap();
        assert_eq!(set.to_vec(), ["builtin:bash", "builtin:view", "mcp:*", "custom:get_weather"]);
        assert_eq!(set.len(), 4);
        for bad in ["", "a b", "mcp:x", "**"] {
            let Err(Error::Config(message)) = ToolSet::new().add_custom(bad) else { panic!("{bad:?} is refused") };
            assert_eq!(message, format!("invalid custom tool name {bad:?}{TOOL_NAME_REFUSAL}"));
        }
        let Err(Error::Config(message)) = ToolSet::new().add_builtin_many(["bash", "no good"]) else {
            panic!("a bad name in a list is refused")
        };
        assert!(message.starts_with("invalid builtin tool name \"no good\""), "{message}");
    }
}

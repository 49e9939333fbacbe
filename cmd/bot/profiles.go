package main

import (
	"log/slog"
	"strings"

	"github.com/bobbinbot/bobbin/agent/profile"
	"github.com/bobbinbot/bobbin/bot"
	"github.com/bobbinbot/bobbin/mcp"
	"github.com/bobbinbot/bobbin/provider"
)

// loadProfiles reads PROFILES_CONFIG: every problem, unset ${VARS}
// included, is a start-up problem naming the variable, the file and the
// field. Profiles may name only servers of MCP_CONFIG when it is set.
func loadProfiles(path string, getenv func(string) string, mcfg *mcp.Config, probs *problems) *profile.Config {
	if path == "" {
		return nil
	}
	chk := profile.Check{Getenv: getenv}
	if mcfg != nil {
		chk.Servers = mcpServerNames(mcfg)
	}
	cfg, err := profile.Load(path, chk)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			probs.add("PROFILES_CONFIG: " + line)
		}
		return nil
	}
	return cfg
}

// mcpServerNames are the server names of an MCP config, in every
// workspace.
func mcpServerNames(c *mcp.Config) []string {
	names := []string{}
	for _, s := range c.Servers {
		names = append(names, s.Name)
	}
	for _, ws := range c.Workspaces {
		for _, s := range ws.Servers {
			names = append(names, s.Name)
		}
	}
	return names
}

// profileOptions builds the model clients the profiles' providers name,
// with the environment's endpoint settings otherwise.
func profileOptions(cfg config, pc *profile.Config, log *slog.Logger) bot.ProfileOptions {
	po := bot.ProfileOptions{Config: pc}
	if pc == nil || len(pc.Providers) == 0 {
		return po
	}
	po.Providers = make(map[string]provider.Provider, len(pc.Providers))
	for name, p := range pc.Providers {
		c := cfg
		c.LLMProvider, c.LLMBaseURL, c.LLMAPIKey = p.Kind, p.BaseURL, p.APIKey
		po.Providers[name] = newProvider(c, log)
	}
	return po
}

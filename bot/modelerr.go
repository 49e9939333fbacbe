package bot

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/bobbinbot/bobbin/provider"
)

// failureFooter is the thread's last line when a turn failed: what went
// wrong with the model endpoint, in words people can act on, and where to
// look; never the endpoint's own message (it may quote the key) nor its
// address.
func failureFooter(err error) string {
	const log = " Details are in the bot's log."
	var ae *provider.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Status == 401 || ae.Status == 403 || ae.Type == "authentication_error" || ae.Type == "permission_error" || ae.Code == "invalid_api_key":
			return "_The model endpoint refused the bot's API key (" + statusWords(ae) + "). Whoever runs Bobbin should check `LLM_API_KEY`, and that the key may use this model." + log + "_"
		case unknownModel(ae):
			return "_The model endpoint does not know the model the bot asked for (" + statusWords(ae) + "). Whoever runs Bobbin should check `LLM_MODEL` against the models the endpoint offers." + log + "_"
		case ae.Status == 404:
			return "_The model endpoint answered “not found” (HTTP 404): `LLM_BASE_URL` may lack part of its path (an OpenAI-compatible server's usually ends in `/v1`)." + log + "_"
		}
	}
	if unreachable(err) {
		return "_I couldn't reach the model endpoint: nothing answered at its address. Whoever runs Bobbin should check that the model server is running and that `LLM_BASE_URL` points at it." + log + "_"
	}
	return "_Sorry, something went wrong while I was answering. Please try again._"
}

func statusWords(ae *provider.APIError) string {
	if ae.Status == 0 {
		return "an error in its answer"
	}
	return "HTTP " + strconv.Itoa(ae.Status)
}

// unknownModel recognizes the providers' "no such model" answers:
// OpenAI's model_not_found, Anthropic's not_found_error naming the model,
// Ollama's and vLLM's 404 "model … not found" / "does not exist".
func unknownModel(ae *provider.APIError) bool {
	if ae.Code == "model_not_found" {
		return true
	}
	m := strings.ToLower(ae.Message)
	mentionsModel := strings.Contains(m, "model")
	switch {
	case ae.Status == 404 && mentionsModel:
		return true
	case (ae.Status == 400 || ae.Status == 422) && mentionsModel &&
		(strings.Contains(m, "not found") || strings.Contains(m, "does not exist") || strings.Contains(m, "not a valid model") || strings.Contains(m, "unknown model")):
		return true
	}
	return false
}

// unreachable reports a model endpoint that did not answer at all: refused
// or reset connections, unknown host names, dial timeouts.
func unreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &dns):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	return false
}

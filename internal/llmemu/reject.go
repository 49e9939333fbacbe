package llmemu

import (
	"fmt"
	"net/http"
)

// Rejects lists request features an emulated endpoint refuses with HTTP
// 400, each with the error text the real service sends (recorded from
// reports of the real APIs), so clients' fallbacks are tested against what
// they will meet.
type Rejects struct {
	// MaxTokens: an OpenAI reasoning model (o-series, gpt-5) refusing
	// max_tokens ("Unsupported parameter: 'max_tokens' is not supported
	// with this model. Use 'max_completion_tokens' instead.", param
	// max_tokens, code unsupported_parameter).
	MaxTokens bool
	// MaxCompletionTokens: an older compatible server (Azure's wording)
	// refusing max_completion_tokens ("Unrecognized request argument
	// supplied: max_completion_tokens").
	MaxCompletionTokens bool
	// StreamOptions: a server refusing stream_options ("Unknown parameter:
	// 'stream_options'.", param stream_options, code unknown_parameter).
	StreamOptions bool
	// Images: a model without vision. OpenAI: "Invalid content type.
	// image_url is only supported by certain models." (param
	// messages.[i].content.[j].type); Anthropic: "Could not process image".
	Images bool
	// Documents: a server without file input. OpenAI-compatible: vLLM's
	// "Unsupported chat content part type: 'file'. …"; Anthropic: "Could
	// not process PDF".
	Documents bool
}

// SetReject changes which features the server refuses, for later
// requests.
func (s *Server) SetReject(r Rejects) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = r
}

// vLLMFileRefusal is vLLM's answer to a "file" content part, verbatim.
const vLLMFileRefusal = `{"error":{"message":"Unsupported chat content part type: 'file'. Supported types: audio_embeds, audio_url, image_embeds, image_pil, image_url, input_audio, input_image, input_text, output_text, prompt_embeds, refusal, text, thinking, tool_reference, video_url. (parameter=type, value=file)","type":"BadRequestError","param":null,"code":400}}`

// refusal returns the error for a request using a refused feature.
func (s *Server) refusal(rec *Recorded) (ErrorReply, bool) {
	s.mu.Lock()
	rj := s.reject
	s.mu.Unlock()
	bad := func(e ErrorReply) (ErrorReply, bool) {
		e.Status = http.StatusBadRequest
		if e.Type == "" {
			e.Type = "invalid_request_error"
		}
		return e, true
	}
	if rec.Protocol == OpenAI {
		_, maxTok := rec.JSON["max_tokens"]
		_, maxCompl := rec.JSON["max_completion_tokens"]
		_, streamOpts := rec.JSON["stream_options"]
		switch {
		case rj.MaxTokens && maxTok:
			return bad(ErrorReply{Message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
				Param: "max_tokens", Code: "unsupported_parameter"})
		case rj.MaxCompletionTokens && maxCompl:
			return bad(ErrorReply{Message: "Unrecognized request argument supplied: max_completion_tokens"})
		case rj.StreamOptions && streamOpts:
			return bad(ErrorReply{Message: "Unknown parameter: 'stream_options'.", Param: "stream_options", Code: "unknown_parameter"})
		}
	}
	for i, m := range rec.Messages {
		for j, md := range m.Media {
			switch {
			case rj.Images && md.Kind == "image" && rec.Protocol == OpenAI:
				return bad(ErrorReply{Message: "Invalid content type. image_url is only supported by certain models.",
					Param: fmt.Sprintf("messages.[%d].content.[%d].type", i, j)})
			case rj.Images && md.Kind == "image":
				return bad(ErrorReply{Message: "Could not process image"})
			case rj.Documents && md.Kind == "document" && rec.Protocol == OpenAI:
				return bad(ErrorReply{Body: vLLMFileRefusal})
			case rj.Documents && md.Kind == "document":
				return bad(ErrorReply{Message: "Could not process PDF"})
			}
		}
	}
	return ErrorReply{}, false
}

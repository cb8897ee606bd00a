package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/straitgw/strait/internal/llm/translate"
)

// modelList is what GET /v1/models lists: each route's Models, or its
// Match when that is an exact name, in route order, each name once (the
// first route that names it serves it). Both bodies are made once.
type modelList struct {
	entries   []modelEntry
	created   time.Time
	openai    []byte
	anthropic []byte
}

type modelEntry struct {
	id, owner string
}

// The model objects of each dialect's models API.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func newModelList(routes []*route, created time.Time) modelList {
	ml := modelList{created: created.UTC().Truncate(time.Second)}
	seen := map[string]bool{}
	for _, r := range routes {
		names := r.Models
		if len(names) == 0 && r.exact {
			names = []string{r.Match}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				ml.entries = append(ml.entries, modelEntry{id: n, owner: r.p.Name})
			}
		}
	}
	oa := struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{Object: "list", Data: []openAIModel{}}
	an := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: []anthropicModel{}}
	for _, e := range ml.entries {
		oa.Data = append(oa.Data, ml.openAIModel(e))
		an.Data = append(an.Data, ml.anthropicModel(e))
	}
	if n := len(ml.entries); n > 0 {
		an.FirstID, an.LastID = &ml.entries[0].id, &ml.entries[n-1].id
	}
	ml.openai, _ = json.Marshal(oa)
	ml.anthropic, _ = json.Marshal(an)
	return ml
}

func (ml *modelList) openAIModel(e modelEntry) openAIModel {
	return openAIModel{ID: e.id, Object: "model", Created: ml.created.Unix(), OwnedBy: e.owner}
}

func (ml *modelList) anthropicModel(e modelEntry) anthropicModel {
	return anthropicModel{Type: "model", ID: e.id, DisplayName: e.id, CreatedAt: ml.created.Format(time.RFC3339)}
}

// listModels answers GET /v1/models in the client's dialect (Anthropic's
// when the client sent anthropic-version).
func (x *exchange) listModels() {
	body := x.g.models.openai
	if x.client == translate.Anthropic {
		body = x.g.models.anthropic
	}
	x.writeBody(http.StatusOK, "application/json", body)
}

// getModel answers GET /v1/models/{id}: a listed model, or any name a route
// matches.
func (x *exchange) getModel(id string) {
	ml := &x.g.models
	e := modelEntry{id: id}
	for _, le := range ml.entries {
		if le.id == id {
			e.owner = le.owner
			break
		}
	}
	if e.owner == "" {
		if rt := x.g.match(id); rt != nil {
			e.owner = rt.p.Name
		}
	}
	if e.owner == "" {
		x.fail(errNoRoute, &translate.Error{Status: 404, Kind: kindNotFound, Param: "model",
			Message: fmt.Sprintf("model %q is not served by this gateway", clip(id))})
		return
	}
	var body []byte
	if x.client == translate.Anthropic {
		body, _ = json.Marshal(ml.anthropicModel(e))
	} else {
		body, _ = json.Marshal(ml.openAIModel(e))
	}
	x.writeBody(http.StatusOK, "application/json", body)
}

package authz

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of topic and config administration.
const (
	keyCreateTopics            int16 = 19
	keyDeleteTopics            int16 = 20
	keyDescribeConfigs         int16 = 32
	keyAlterConfigs            int16 = 33
	keyCreatePartitions        int16 = 37
	keyIncrementalAlterConfigs int16 = 44
)

// checkCreateTopics: CREATE on the cluster or on each topic. From v5 the
// answer carries each created topic's configs, which need
// DESCRIBE_CONFIGS on it: without, they are left out and the topic's
// config error is TOPIC_AUTHORIZATION_FAILED, as at a broker.
func checkCreateTopics(a *call) error {
	r, ok := a.req.Body.(*kmsg.CreateTopicsRequest)
	if !ok {
		return errWrongBody(keyCreateTopics, a.req.Body)
	}
	var refused []kmsg.CreateTopicsResponseTopic
	hidden := map[string]bool{} // created, configs not to be shown
	n := 0
	for _, t := range r.Topics {
		configs := a.quietly(resTopic, t.Topic, opDescribeConfigs)
		if !a.mayCreateTopic(t.Topic) {
			refused = append(refused, createTopicError(t.Topic, kerr.TopicAuthorizationFailed.Code, configs))
			continue
		}
		if !configs && r.Version >= 5 {
			hidden[t.Topic] = true
		}
		r.Topics[n] = t
		n++
	}
	if len(refused) == 0 && len(hidden) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Topics = r.Topics[:n]
	if n == 0 {
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.Topics = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		c, ok := resp.(*kmsg.CreateTopicsResponse)
		if !ok {
			return
		}
		for i := range c.Topics {
			if t := &c.Topics[i]; hidden[t.Topic] {
				t.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
				t.NumPartitions, t.ReplicationFactor = -1, -1
				t.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
			}
		}
		c.Topics = append(c.Topics, refused...)
	})
	return nil
}

// createTopicError is a topic the broker was not asked to create; its
// config error says whether the principal may see its configs.
func createTopicError(name string, code int16, configs bool) kmsg.CreateTopicsResponseTopic {
	t := kmsg.NewCreateTopicsResponseTopic()
	t.Topic, t.ErrorCode = name, code
	msg := "Authorization failed."
	if code != kerr.TopicAuthorizationFailed.Code {
		msg = kerr.ErrorForCode(code).Error()
	}
	t.ErrorMessage = &msg
	if !configs {
		t.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
	}
	t.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
	return t
}

func refuseCreateTopics(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.CreateTopicsRequest)
	if !ok {
		return nil, errWrongBody(keyCreateTopics, req)
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = r.Version
	for _, t := range r.Topics {
		resp.Topics = append(resp.Topics, createTopicError(t.Topic, code, true))
	}
	return resp, nil
}

// checkDeleteTopics: DELETE on each topic. From v6 a topic may be named by
// ID: one that does not resolve is UNKNOWN_TOPIC_ID, and one the principal
// may not describe is refused without its name, as at a broker.
func checkDeleteTopics(a *call) error {
	r, ok := a.req.Body.(*kmsg.DeleteTopicsRequest)
	if !ok {
		return errWrongBody(keyDeleteTopics, a.req.Body)
	}
	if r.Version < 6 {
		return checkDeleteTopicNames(a, r)
	}
	var refused []kmsg.DeleteTopicsResponseTopic
	n := 0
	for _, t := range r.Topics {
		if t.Topic != nil {
			if a.may(resTopic, *t.Topic, opDelete) {
				r.Topics[n] = t
				n++
				continue
			}
			refused = append(refused, deleteTopicError(t.Topic, t.TopicID, kerr.TopicAuthorizationFailed.Code))
			continue
		}
		name, code := a.topicName(1, 0, "", t.TopicID)
		switch {
		case code != 0:
			refused = append(refused, deleteTopicError(nil, t.TopicID, code))
		case !a.quietly(resTopic, name, opDescribe):
			a.denied++
			a.logDenied(resTopic, name, opDelete)
			refused = append(refused, deleteTopicError(nil, t.TopicID, kerr.TopicAuthorizationFailed.Code))
		case !a.may(resTopic, name, opDelete):
			refused = append(refused, deleteTopicError(&name, t.TopicID, kerr.TopicAuthorizationFailed.Code))
		default:
			r.Topics[n] = t
			n++
		}
	}
	r.Topics = r.Topics[:n]
	return answerDeleteTopics(a, n, refused)
}

// checkDeleteTopicNames is DeleteTopics before v6: names only.
func checkDeleteTopicNames(a *call, r *kmsg.DeleteTopicsRequest) error {
	var refused []kmsg.DeleteTopicsResponseTopic
	r.TopicNames, refused = splitRefused(r.TopicNames, func(name string) int16 {
		return a.topicCode(name, opDelete)
	}, deleteTopicNameError)
	return answerDeleteTopics(a, len(r.TopicNames), refused)
}

// answerDeleteTopics is answerRefused for DeleteTopics, whose topics are
// names before v6 and entries from it.
func answerDeleteTopics(a *call, left int, refused []kmsg.DeleteTopicsResponseTopic) error {
	return answerRefused(a, left, refused, kmsg.NewPtrDeleteTopicsResponse,
		func(resp *kmsg.DeleteTopicsResponse) *[]kmsg.DeleteTopicsResponseTopic { return &resp.Topics })
}

func deleteTopicError(name *string, id [16]byte, code int16) kmsg.DeleteTopicsResponseTopic {
	t := kmsg.NewDeleteTopicsResponseTopic()
	t.Topic, t.TopicID, t.ErrorCode = name, id, code
	msg := kerr.ErrorForCode(code).Error()
	t.ErrorMessage = &msg
	return t
}

// deleteTopicNameError is the error entry of a topic named before v6.
func deleteTopicNameError(name string, code int16) kmsg.DeleteTopicsResponseTopic {
	return deleteTopicError(&name, [16]byte{}, code)
}

func refuseDeleteTopics(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DeleteTopicsRequest)
	if !ok {
		return nil, errWrongBody(keyDeleteTopics, req)
	}
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.TopicNames, code, deleteTopicNameError)
	for _, t := range r.Topics {
		resp.Topics = append(resp.Topics, deleteTopicError(t.Topic, t.TopicID, code))
	}
	return resp, nil
}

// checkCreatePartitions: ALTER on each topic.
func checkCreatePartitions(a *call) error {
	r, ok := a.req.Body.(*kmsg.CreatePartitionsRequest)
	if !ok {
		return errWrongBody(keyCreatePartitions, a.req.Body)
	}
	var refused []kmsg.CreatePartitionsResponseTopic
	r.Topics, refused = splitRefused(r.Topics, func(t kmsg.CreatePartitionsRequestTopic) int16 {
		return a.topicCode(t.Topic, opAlter)
	}, createPartitionsError)
	return answerRefused(a, len(r.Topics), refused, kmsg.NewPtrCreatePartitionsResponse,
		func(resp *kmsg.CreatePartitionsResponse) *[]kmsg.CreatePartitionsResponseTopic { return &resp.Topics })
}

func createPartitionsError(rt kmsg.CreatePartitionsRequestTopic, code int16) kmsg.CreatePartitionsResponseTopic {
	t := kmsg.NewCreatePartitionsResponseTopic()
	t.Topic, t.ErrorCode = rt.Topic, code
	msg := kerr.ErrorForCode(code).Error()
	t.ErrorMessage = &msg
	return t
}

func refuseCreatePartitions(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.CreatePartitionsRequest)
	if !ok {
		return nil, errWrongBody(keyCreatePartitions, req)
	}
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.Version = r.Version
	resp.Topics = refusals(r.Topics, code, createPartitionsError)
	return resp, nil
}

// configResource is a config resource's authorization: op on a topic, a
// group, or (brokers, broker loggers, client metrics) the cluster, and the
// error its refusal gets. A type the filter does not know is refused with
// INVALID_REQUEST: it cannot say what it would be about.
func configResource(a *call, typ kmsg.ConfigResourceType, name string, op operation) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !a.may(resTopic, name, op) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !a.may(resGroup, name, op) {
			return kerr.GroupAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !a.mayCluster(op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	default:
		a.denied++
		return kerr.InvalidRequest.Code
	}
	return 0
}

// checkDescribeConfigs: DESCRIBE_CONFIGS on each resource.
func checkDescribeConfigs(a *call) error {
	r, ok := a.req.Body.(*kmsg.DescribeConfigsRequest)
	if !ok {
		return errWrongBody(keyDescribeConfigs, a.req.Body)
	}
	var refused []kmsg.DescribeConfigsResponseResource
	r.Resources, refused = splitRefused(r.Resources, func(res kmsg.DescribeConfigsRequestResource) int16 {
		return configResource(a, res.ResourceType, res.ResourceName, opDescribeConfigs)
	}, describeConfigsError)
	return answerRefused(a, len(r.Resources), refused, kmsg.NewPtrDescribeConfigsResponse,
		func(resp *kmsg.DescribeConfigsResponse) *[]kmsg.DescribeConfigsResponseResource {
			return &resp.Resources
		})
}

func describeConfigsError(res kmsg.DescribeConfigsRequestResource, code int16) kmsg.DescribeConfigsResponseResource {
	r := kmsg.NewDescribeConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = res.ResourceType, res.ResourceName, code
	msg := kerr.ErrorForCode(code).Error()
	r.ErrorMessage = &msg
	r.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
	return r
}

func refuseDescribeConfigs(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DescribeConfigsRequest)
	if !ok {
		return nil, errWrongBody(keyDescribeConfigs, req)
	}
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Version = r.Version
	resp.Resources = refusals(r.Resources, code, describeConfigsError)
	return resp, nil
}

// checkAlterConfigs: ALTER_CONFIGS on each resource.
func checkAlterConfigs(a *call) error {
	r, ok := a.req.Body.(*kmsg.AlterConfigsRequest)
	if !ok {
		return errWrongBody(keyAlterConfigs, a.req.Body)
	}
	var refused []kmsg.AlterConfigsResponseResource
	r.Resources, refused = splitRefused(r.Resources, func(res kmsg.AlterConfigsRequestResource) int16 {
		return configResource(a, res.ResourceType, res.ResourceName, opAlterConfigs)
	}, alterConfigsError)
	return answerRefused(a, len(r.Resources), refused, kmsg.NewPtrAlterConfigsResponse,
		func(resp *kmsg.AlterConfigsResponse) *[]kmsg.AlterConfigsResponseResource { return &resp.Resources })
}

func alterConfigsError(res kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
	r := kmsg.NewAlterConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = res.ResourceType, res.ResourceName, code
	msg := kerr.ErrorForCode(code).Error()
	r.ErrorMessage = &msg
	return r
}

func refuseAlterConfigs(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.AlterConfigsRequest)
	if !ok {
		return nil, errWrongBody(keyAlterConfigs, req)
	}
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.Version = r.Version
	resp.Resources = refusals(r.Resources, code, alterConfigsError)
	return resp, nil
}

// checkIncrementalAlterConfigs: ALTER_CONFIGS on each resource.
func checkIncrementalAlterConfigs(a *call) error {
	r, ok := a.req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	if !ok {
		return errWrongBody(keyIncrementalAlterConfigs, a.req.Body)
	}
	var refused []kmsg.IncrementalAlterConfigsResponseResource
	r.Resources, refused = splitRefused(r.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return configResource(a, res.ResourceType, res.ResourceName, opAlterConfigs)
	}, incrementalAlterError)
	return answerRefused(a, len(r.Resources), refused, kmsg.NewPtrIncrementalAlterConfigsResponse,
		func(resp *kmsg.IncrementalAlterConfigsResponse) *[]kmsg.IncrementalAlterConfigsResponseResource {
			return &resp.Resources
		})
}

func incrementalAlterError(res kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
	r := kmsg.NewIncrementalAlterConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = res.ResourceType, res.ResourceName, code
	msg := kerr.ErrorForCode(code).Error()
	r.ErrorMessage = &msg
	return r
}

func refuseIncrementalAlterConfigs(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.IncrementalAlterConfigsRequest)
	if !ok {
		return nil, errWrongBody(keyIncrementalAlterConfigs, req)
	}
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.Version = r.Version
	resp.Resources = refusals(r.Resources, code, incrementalAlterError)
	return resp, nil
}

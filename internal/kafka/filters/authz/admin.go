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
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Topics = r.Topics[:n]
	return answerDeleteTopics(a, n, refused)
}

// checkDeleteTopicNames is DeleteTopics before v6: names only.
func checkDeleteTopicNames(a *call, r *kmsg.DeleteTopicsRequest) error {
	var refused []kmsg.DeleteTopicsResponseTopic
	n := 0
	for _, name := range r.TopicNames {
		if a.may(resTopic, name, opDelete) {
			r.TopicNames[n] = name
			n++
			continue
		}
		refused = append(refused, deleteTopicError(&name, [16]byte{}, kerr.TopicAuthorizationFailed.Code))
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.TopicNames = r.TopicNames[:n]
	return answerDeleteTopics(a, n, refused)
}

// answerDeleteTopics answers at once when no topic is left to delete, or
// adds the refused topics to the broker's answer.
func answerDeleteTopics(a *call, left int, refused []kmsg.DeleteTopicsResponseTopic) error {
	if left == 0 {
		resp := kmsg.NewPtrDeleteTopicsResponse()
		resp.Topics = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		if d, ok := resp.(*kmsg.DeleteTopicsResponse); ok {
			d.Topics = append(d.Topics, refused...)
		}
	})
	return nil
}

func deleteTopicError(name *string, id [16]byte, code int16) kmsg.DeleteTopicsResponseTopic {
	t := kmsg.NewDeleteTopicsResponseTopic()
	t.Topic, t.TopicID, t.ErrorCode = name, id, code
	msg := kerr.ErrorForCode(code).Error()
	t.ErrorMessage = &msg
	return t
}

func refuseDeleteTopics(req kmsg.Request, code int16) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DeleteTopicsRequest)
	if !ok {
		return nil, errWrongBody(keyDeleteTopics, req)
	}
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = r.Version
	for _, name := range r.TopicNames {
		resp.Topics = append(resp.Topics, deleteTopicError(&name, [16]byte{}, code))
	}
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
	n := 0
	for _, t := range r.Topics {
		if a.may(resTopic, t.Topic, opAlter) {
			r.Topics[n] = t
			n++
			continue
		}
		refused = append(refused, createPartitionsError(t.Topic, kerr.TopicAuthorizationFailed.Code))
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Topics = r.Topics[:n]
	if n == 0 {
		resp := kmsg.NewPtrCreatePartitionsResponse()
		resp.Topics = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		if c, ok := resp.(*kmsg.CreatePartitionsResponse); ok {
			c.Topics = append(c.Topics, refused...)
		}
	})
	return nil
}

func createPartitionsError(name string, code int16) kmsg.CreatePartitionsResponseTopic {
	t := kmsg.NewCreatePartitionsResponseTopic()
	t.Topic, t.ErrorCode = name, code
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
	for _, t := range r.Topics {
		resp.Topics = append(resp.Topics, createPartitionsError(t.Topic, code))
	}
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
	n := 0
	for _, res := range r.Resources {
		if code := configResource(a, res.ResourceType, res.ResourceName, opDescribeConfigs); code != 0 {
			refused = append(refused, describeConfigsError(res.ResourceType, res.ResourceName, code))
			continue
		}
		r.Resources[n] = res
		n++
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Resources = r.Resources[:n]
	if n == 0 {
		resp := kmsg.NewPtrDescribeConfigsResponse()
		resp.Resources = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		if d, ok := resp.(*kmsg.DescribeConfigsResponse); ok {
			d.Resources = append(d.Resources, refused...)
		}
	})
	return nil
}

func describeConfigsError(typ kmsg.ConfigResourceType, name string, code int16) kmsg.DescribeConfigsResponseResource {
	r := kmsg.NewDescribeConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = typ, name, code
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
	for _, res := range r.Resources {
		resp.Resources = append(resp.Resources, describeConfigsError(res.ResourceType, res.ResourceName, code))
	}
	return resp, nil
}

// checkAlterConfigs: ALTER_CONFIGS on each resource.
func checkAlterConfigs(a *call) error {
	r, ok := a.req.Body.(*kmsg.AlterConfigsRequest)
	if !ok {
		return errWrongBody(keyAlterConfigs, a.req.Body)
	}
	var refused []kmsg.AlterConfigsResponseResource
	n := 0
	for _, res := range r.Resources {
		if code := configResource(a, res.ResourceType, res.ResourceName, opAlterConfigs); code != 0 {
			refused = append(refused, alterConfigsError(res.ResourceType, res.ResourceName, code))
			continue
		}
		r.Resources[n] = res
		n++
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Resources = r.Resources[:n]
	if n == 0 {
		resp := kmsg.NewPtrAlterConfigsResponse()
		resp.Resources = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		if ac, ok := resp.(*kmsg.AlterConfigsResponse); ok {
			ac.Resources = append(ac.Resources, refused...)
		}
	})
	return nil
}

func alterConfigsError(typ kmsg.ConfigResourceType, name string, code int16) kmsg.AlterConfigsResponseResource {
	r := kmsg.NewAlterConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = typ, name, code
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
	for _, res := range r.Resources {
		resp.Resources = append(resp.Resources, alterConfigsError(res.ResourceType, res.ResourceName, code))
	}
	return resp, nil
}

// checkIncrementalAlterConfigs: ALTER_CONFIGS on each resource.
func checkIncrementalAlterConfigs(a *call) error {
	r, ok := a.req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	if !ok {
		return errWrongBody(keyIncrementalAlterConfigs, a.req.Body)
	}
	var refused []kmsg.IncrementalAlterConfigsResponseResource
	n := 0
	for _, res := range r.Resources {
		if code := configResource(a, res.ResourceType, res.ResourceName, opAlterConfigs); code != 0 {
			refused = append(refused, incrementalAlterError(res.ResourceType, res.ResourceName, code))
			continue
		}
		r.Resources[n] = res
		n++
	}
	if len(refused) == 0 {
		a.req.Unchanged()
		return nil
	}
	r.Resources = r.Resources[:n]
	if n == 0 {
		resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
		resp.Resources = refused
		a.respond(resp)
		return nil
	}
	a.later(func(resp kmsg.Response) {
		if ac, ok := resp.(*kmsg.IncrementalAlterConfigsResponse); ok {
			ac.Resources = append(ac.Resources, refused...)
		}
	})
	return nil
}

func incrementalAlterError(typ kmsg.ConfigResourceType, name string, code int16) kmsg.IncrementalAlterConfigsResponseResource {
	r := kmsg.NewIncrementalAlterConfigsResponseResource()
	r.ResourceType, r.ResourceName, r.ErrorCode = typ, name, code
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
	for _, res := range r.Resources {
		resp.Resources = append(resp.Resources, incrementalAlterError(res.ResourceType, res.ResourceName, code))
	}
	return resp, nil
}

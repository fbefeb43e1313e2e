package kinesistest

// DescribeAccountSettings and UpdateAccountSettings (account.go has the
// rules).

type accountSettingsOutput struct {
	MinimumThroughputBillingCommitment commitmentJSON
}

func (s *Server) describeAccountSettings(r *request) (any, error) {
	var in struct{}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	return accountSettingsOutput{MinimumThroughputBillingCommitment: s.commitment.shape(r.nowMs)}, nil
}

type updateAccountSettingsInput struct {
	MinimumThroughputBillingCommitment *struct {
		Status *string
	}
}

func (s *Server) updateAccountSettings(r *request) (any, error) {
	var in updateAccountSettingsInput
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	var v violations
	switch c := in.MinimumThroughputBillingCommitment; {
	case c == nil:
		v.addNull("minimumThroughputBillingCommitment")
	case c.Status == nil:
		v.addNull("minimumThroughputBillingCommitment.status")
	case *c.Status != commitmentEnabled && *c.Status != commitmentDisabled:
		v.add(*c.Status, "minimumThroughputBillingCommitment.status", "satisfy enum value set: [ENABLED, DISABLED]")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return accountSettingsOutput{
		MinimumThroughputBillingCommitment: s.commitment.set(*in.MinimumThroughputBillingCommitment.Status, r.nowMs),
	}, nil
}
